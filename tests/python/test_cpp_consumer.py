"""A C++ program finds the pip-installed steptrace with find_package and links it."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import steptrace

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_example_server_builds_against_the_installed_package(tmp_path):
    build = tmp_path / "build"
    subprocess.run(
        ["cmake", "-S", str(ROOT / "examples" / "server"), "-B", str(build), f"-Dsteptrace_DIR={steptrace.cmake_dir()}"],
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
