"""Where the installed package keeps its C++ side, and where PyTorch's wheels keep libcupti."""

from __future__ import annotations

import os
from pathlib import Path


def _package_dir(*parts: str) -> str:
    path = Path(__file__).resolve().parent.parent.joinpath(*parts)  # the package, above _common/
    if not path.is_dir():
        raise FileNotFoundError(
            f"steptrace: {path} is missing; was steptrace installed from a wheel or `pip install .`?"
        )
    return str(path)


def cmake_dir() -> str:
    """For C++ consumers: ``cmake -Dsteptrace_DIR=$(python -c 'import steptrace; print(steptrace.cmake_dir())')``."""
    return _package_dir("lib", "cmake", "steptrace")


def include_dir() -> str:
    return _package_dir("include")


def cupti_dirs() -> list:
    """Where the nvidia-* wheels that PyTorch installs keep libcupti (nothing is loaded here)."""
    import glob
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec else []
    return sorted(
        {os.path.dirname(p) for root in roots for p in glob.glob(os.path.join(root, "*", "lib", "libcupti.so*"))}
    )
