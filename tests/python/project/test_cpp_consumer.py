"""A C++ program finds the pip-installed steptrace with find_package and links it."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import steptrace
from conftest import ROOT  # noqa: E402


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_example_server_builds_against_the_installed_package(tmp_path):
    build = tmp_path / "build"
    subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT / "examples" / "server"),
            "-B",
            str(build),
            f"-Dsteptrace_DIR={steptrace.cmake_dir()}",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    proc = subprocess.run([str(build / "request_server"), "3", "40"], check=True, capture_output=True, text=True)
    d = json.loads(proc.stdout)
    assert d["steps"] == 3 * (40 - 5)  # warm-up: the first 5 steps of each thread
    assert d["threads"] == 3
    phases = d["phases"]
    assert set(phases) == {"preprocess", "compute", "postprocess", "other"}
    assert phases["compute"]["calls"] == 3 * 35
    # Spins are lower bounds on each phase; one request in ten has a 3 ms compute.
    assert phases["preprocess"]["p50_ms"] >= 0.2
    assert phases["compute"]["p50_ms"] >= 1.0
    assert phases["compute"]["p99_ms"] >= 3.0
    assert sum(p["share"] for p in phases.values()) == pytest.approx(1.0)
    assert "p99" in proc.stderr


def test_headers_ship_with_the_package():
    assert (Path(steptrace.include_dir()) / "steptrace" / "steptrace.hpp").is_file()


def _build_consumer(tmp_path, compiled_out: bool) -> Path:
    build = tmp_path / ("out" if compiled_out else "in")
    subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT / "tests" / "python" / "consumer"),
            "-B",
            str(build),
            f"-Dsteptrace_DIR={steptrace.cmake_dir()}",
            f"-DCOMPILED_OUT={'ON' if compiled_out else 'OFF'}",
        ],
        check=True,
        capture_output=True,
    )
    built = subprocess.run(["cmake", "--build", str(build), "--verbose"], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    return build / "consumer"


def _undefined_symbols(binary: Path) -> str:
    return subprocess.run(["nm", "-uC", str(binary)], check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("nm") is None, reason="needs cmake and nm")
def test_a_cxx14_consumer_gets_cxx17_and_the_ring_abi_is_in_the_symbol(tmp_path):
    binary = _build_consumer(tmp_path, compiled_out=False)
    proc = subprocess.run(
        [str(binary)], check=True, capture_output=True, text=True, env={"STEPTRACE_PRINT_AT_EXIT": "never"}
    )
    assert proc.stdout.strip() == "28"
    # The inline fast path reads the binding by a symbol that names its layout version: a
    # consumer built against another layout fails to link instead of corrupting memory.
    assert "steptrace::detail::ring_v1::t_binding" in _undefined_symbols(binary)


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("nm") is None, reason="needs cmake and nm")
def test_compiled_out_macros_leave_no_steptrace_call(tmp_path):
    binary = _build_consumer(tmp_path, compiled_out=True)
    assert subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.strip() == "28"
    assert "steptrace::" not in _undefined_symbols(binary)
