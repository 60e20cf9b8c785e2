"""scripts/setup.sh, the set-up every README command runs: what a fresh machine's first run decides
must hold on its second, so the second run rebuilds nothing (a first run that installed ccache after
setup.sh had decided there was none built without it, and the second run, with it, rebuilt all 87
files)."""

import os
import subprocess

from conftest import ROOT


def test_a_first_run_that_installs_ccache_builds_with_it(tmp_path):
    tools, later = tmp_path / "tools", tmp_path / "installed"
    tools.mkdir()
    later.mkdir()
    for tool in ("dirname", "python3"):  # what sourcing it and setup_environment run; no ccache yet
        (tools / tool).symlink_to(subprocess.check_output(["bash", "-c", f"command -v {tool}"], text=True).strip())
    (later / "ccache").write_text('#!/bin/sh\nexec "$@"\n')
    (later / "ccache").chmod(0o755)
    script = f"""
        source {ROOT}/scripts/setup.sh
        echo "sourced: ${{CMAKE_CXX_COMPILER_LAUNCHER:-none}}"
        need_debian_packages() {{ export PATH="{later}:$PATH"; }}  # as apt installing ccache would
        need_python_packages() {{ :; }}
        setup_environment
        echo "set up: ${{CMAKE_CXX_COMPILER_LAUNCHER:-none}}"
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CMAKE_", "CCACHE_"))}
    env["PATH"] = str(tools)
    out = subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "sourced: none" in out.stdout and "set up: ccache" in out.stdout, out.stdout + out.stderr
