"""steptrace runs in the main interpreter only: its C++ core (pybind11) hangs while starting in a
sub-interpreter, so importing there raises a clear ImportError instead."""

from __future__ import annotations

import importlib


def in_sub_interpreter() -> bool:
    for name in ("_interpreters", "_xxsubinterpreters"):  # 3.13+, then 3.8-3.12
        try:
            interpreters = importlib.import_module(name)
        except ImportError:
            continue
        try:
            return interpreters.get_current() != interpreters.get_main()
        except Exception:  # an API this version does not have: assume the main interpreter
            return False
    return False


def refuse_sub_interpreter() -> None:
    if in_sub_interpreter():
        raise ImportError(
            "steptrace can only be imported in the main interpreter, not in a sub-interpreter "
            "(its C++ core supports one interpreter per process)"
        )
