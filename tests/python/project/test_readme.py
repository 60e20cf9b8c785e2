"""The README's guide, run as written: every ```python block is a file named by its first line
(`# first.py: ...`), every ```bash line is run in order in one folder, and what the guide says
each step shows is held to what the run wrote. Lines that install or build (`bash scripts/...`,
`pip install ...`) are the scripts CI runs itself (`bash scripts/test` builds and installs the
wheel the suite uses): here they only have to name a script that exists."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT  # noqa: E402

README = ROOT / "README.md"


def blocks(text):
    """(language, body) of each fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def installs(line):
    return line.startswith(("bash scripts/", "pip install "))


def test_the_guides_install_and_build_lines_name_scripts_that_exist():
    for lang, body in blocks(README.read_text()):
        for line in body.splitlines():
            if lang == "bash" and line.startswith("bash scripts/"):
                assert (ROOT / line.split()[1]).is_file(), line


def test_every_block_of_the_guide_runs_and_shows_what_it_says(tmp_path):
    pytest.importorskip("torch")
    text = README.read_text()
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the guide's paths are a clone's
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"  # `python` and `steptrace` of this venv
    # torch's one intra-op thread: with two, a machine already busy (ten CPU burners on 2 cores)
    # turns the guide's 5 ms of compute into 300 ms at OpenMP's barriers, and the captured steps
    # rightly read COMPUTE-BOUND. The guide's claims are about its program, not that machine.
    env.setdefault("OMP_NUM_THREADS", "1")
    ran = []
    try:
        import tensorboard  # noqa: F401

        has_tensorboard = True
    except ImportError:
        has_tensorboard = False
    for lang, body in blocks(text):
        if lang == "python":
            name = re.match(r"# (\S+\.py):", body)
            assert name, f"a python block of the guide names its file on its first line:\n{body[:80]}"
            (tmp_path / name.group(1)).write_text(body)
        elif lang == "bash":
            for line in body.splitlines():
                line = line.split("  #")[0].strip()
                if not line or installs(line):
                    continue
                if line == "source .venv/bin/activate":  # the guide's venv: this test runs its bin/ on the PATH
                    continue
                if "tracked.py" in line and not has_tensorboard:
                    continue  # scripts/test installs it; a bare venv checks the rest
                words = shlex.split(line)
                assigns = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
                argv = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
                argv = [sys.executable if argv[0] == "python" else str(bindir / argv[0])] + argv[1:]
                proc = subprocess.run(
                    argv, cwd=tmp_path, env={**env, **assigns}, capture_output=True, text=True, timeout=300
                )
                assert proc.returncode == 0, f"{line}\n{proc.stdout}\n{proc.stderr}"
                ran.append((line, proc))
    # 2: the loop with no workers is INPUT-BOUND, its fix named with its gain
    before = json.loads((tmp_path / "before.json").read_text())
    assert before["diagnosis"]["label"] == "INPUT-BOUND"
    assert any("num_workers" in advice for advice in before["diagnosis"]["advice"])
    # 3: two workers: shorter steps, and compare says so beyond the noise. The wait for input is
    # what the workers take away (about 0.4x on an idle machine). The step gains less, or nothing,
    # where other work shares the 2 cores with the workers and torch's threads (0.84x, and once
    # 1.8x, under two CPU burners): compare is held to what the two runs measured.
    after = json.loads((tmp_path / "after.json").read_text())
    assert after["phases"]["input"]["mean_ms"] < 0.6 * before["phases"]["input"]["mean_ms"]
    compared = next(p.stdout for line, p in ran if line.startswith("steptrace compare"))
    assert "what the fixes realised" in compared, compared
    ratio = after["step_ms"]["mean"] / before["step_ms"]["mean"]
    if ratio < 0.8:  # as on an idle machine (0.44x)
        assert "faster:" in compared, compared
    elif ratio > 1.0:
        assert "faster:" not in compared, compared
    # 4: TensorBoard got the windows, read back by its own reader
    if has_tensorboard:
        from tracker_files import tensorboard_scalars

        scalars = tensorboard_scalars(tmp_path / "runs")
        assert scalars.get("steptrace/step_p50_ms") and scalars.get("steptrace/input_share")
    # 5: the V100 sample, as the design reads it: INPUT-BOUND with a device view
    shown = next(p.stdout for line, p in ran if line.startswith("steptrace show"))
    assert "diagnosis  INPUT-BOUND" in shown and "device     busy" in shown
    # 6: the capture on demand: five steps kept, read back as the loop reads (INPUT-BOUND)
    captured = next(p.stderr for line, p in ran if line == "python capture.py")
    assert "captured steps 0-4: INPUT-BOUND" in captured, captured
    assert len(list((tmp_path / "steptrace-captures").glob("first-rank0-step0-pid*.pt.trace.json.gz"))) == 1
    assert len(ran) == 5 + has_tensorboard  # every command line of the guide was run
