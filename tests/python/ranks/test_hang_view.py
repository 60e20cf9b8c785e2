"""The job's view of a hang on one rank (steptrace/_live/rank_hangs.py), driven on rows written by
hand into a dict standing for the store: who is judged live or gone, which rank says it, what a
row that cannot be read does. No processes but one reaped child (a pid known to be gone), no clock."""

import json
import os
from pathlib import Path
import socket
import subprocess
import sys
from types import SimpleNamespace

from fake_store import Store

from steptrace import _core
from steptrace._live import rank_hangs
from steptrace._live.rank_verdicts import key

HOST = socket.gethostname()
ZEROS = " ".join(["0"] * 10)  # steps, then the 9 figures of a row


def row(rank, world, phase, seq, left, pid=1, kind="all_reduce", host=HOST):
    left_ms = "4000" if left else "-1"
    return f"r2 {rank} {world} {ZEROS} h {pid} {host} 10 5000 1 {phase} c 0 {kind} {seq} 4500 {left_ms}"


def job(rank, world, rows, slot=100):
    store = Store()
    for r, (at, text) in rows.items():
        store.set(key(r, at), f"{at} {text}")
    return SimpleNamespace(rank=rank, world_size=world, store=store), slot


def tracer(tmp_path):
    core = _core.Tracer()
    core.configure({"jsonl_path": str(tmp_path / "live.jsonl"), "capture_dir": str(tmp_path)})
    return core


def test_the_lowest_live_rank_says_the_hang_and_every_rank_writes_its_view(tmp_path):
    rows = {
        0: (100, row(0, 3, "compute", 10, False)),
        1: (100, row(1, 3, "input", 9, True)),
        2: (99, row(2, 3, "compute", 10, False)),
    }
    core = tracer(tmp_path)
    report = tmp_path / "report.txt"
    report.write_text("steptrace hang report\n\nhead\n\nEvery thread's stack (as faulthandler writes it):\nstacks\n")
    for rank in (0, 2):
        the_job, slot = job(rank, 3, rows)
        window = {"hang_s": 5.0, "hang_report": str(report)}
        said = rank_hangs.JobHang().window(core, the_job, window, slot, key)
        assert said == (rank == 0)
        assert (window.get("label") == "HANG") == (rank == 0)
    assert window.get("hang_ranks") is None  # rank 2 did not say it
    text = report.read_text()
    assert text.count("The job's view:") == 1  # replaced, not added twice
    assert "rank 1 never entered all_reduce #10 of group 0: stuck in `input`" in text
    assert text.endswith("Every thread's stack (as faulthandler writes it):\nstacks\n")
    lines = [json.loads(line)["hang_job"] for line in (tmp_path / "live.jsonl").read_text().splitlines()]
    assert [v["rank"] for v in lines] == [0, 2] and lines[0]["culprits"][0]["rank"] == 1


def test_a_rank_two_slots_behind_is_gone_and_exited_when_its_pid_is_gone_here(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: no process has its pid now
    rows = {
        0: (100, row(0, 3, "wait", 10, True)),
        1: (100, row(1, 3, "wait", 10, True)),
        2: (97, row(2, 3, "compute", 9, True, pid=child.pid)),
    }
    the_job, slot = job(0, 3, rows)
    window = {"hang_s": 5.0}
    assert rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
    assert window["hang_ranks"] == [2]
    assert "rank 2 is gone (its process exited); its last row: step 10, in `compute`" in window["hang_words"]
    # the same row from another host: silent, not known to have exited
    rows[2] = (97, row(2, 3, "compute", 9, True, pid=child.pid, host="elsewhere"))
    the_job, slot = job(0, 3, rows)
    window = {"hang_s": 5.0}
    rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
    assert "no row since: exited, or stuck holding the interpreter" in window["hang_words"]


def test_a_rank_whose_rows_lag_but_runs_here_keeps_its_last_row_and_its_old_steps_do_not_count(tmp_path):
    import os

    lagging = row(2, 3, "input", 9, True, pid=os.getpid()).replace(f"r2 2 3 {ZEROS}", "r2 2 3 40 " + ZEROS[2:])
    rows = {0: (100, row(0, 3, "compute", 10, False)), 1: (100, row(1, 3, "compute", 10, False)), 2: (90, lagging)}
    the_job, slot = job(0, 3, rows)
    window = {"hang_s": 5.0}
    assert rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
    assert (
        window["hang_ranks"] == [2]
        and "rank 2 never entered all_reduce #10 of group 0: stuck in `input`" in window["hang_words"]
    )


def test_a_row_that_cannot_be_read_is_left_out_and_no_hang_is_looked_for_without_one(tmp_path):
    rows = {
        0: (100, row(0, 3, "compute", 10, False)),
        1: (100, row(1, 3, "input", 9, True)),
        2: (100, "r2 2 3 0 0 0 0 0 0 0 0 0 0 h not-a-pid"),
    }
    the_job, slot = job(0, 3, rows)
    window = {"hang_s": 5.0}
    assert rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
    assert window["hang_ranks"] == [1]
    quiet_job, slot = job(0, 3, rows)
    before = dict(quiet_job.store.data)
    assert not rank_hangs.JobHang().window(tracer(tmp_path), quiet_job, {"hang_s": 0.0}, slot, key)
    assert quiet_job.store.data == before  # nothing read or made


def test_a_report_file_that_is_not_steptraces_is_left_as_it_is(tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("someone else's file\n")
    rank_hangs._add_to_report(str(other), "HANG: words")
    assert other.read_text() == "someone else's file\n"
    assert "is not steptrace's as written" in capsys.readouterr().err


def test_a_store_value_with_a_digit_python_reads_as_one_blinds_no_rank(tmp_path):
    """``'²'.isdigit()`` is true and ``int('²')`` raises: one such slot or rank in a key left every
    rank's view unjudged (and rank 0 blamed the store). Now that key is left out, the others judged."""
    rows = {
        0: (100, row(0, 3, "compute", 10, False)),
        1: (100, row(1, 3, "input", 9, True)),
        2: (100, row(2, 3, "compute", 10, False)),
    }
    for crafted in (
        "² " + row(2, 3, "compute", 10, False),
        "100 " + row(2, 3, "compute", 10, False).replace("r2 2 ", "r2 ² ", 1),
        "١٠٠ " + row(2, 3, "compute", 10, False),
    ):
        the_job, slot = job(0, 3, rows)
        the_job.store.set(key(2, slot - 1), crafted)  # its other key: its row of this slot stands
        window = {"hang_s": 5.0}
        assert rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
        assert window["hang_ranks"] == [1], crafted
        assert "rank 1 never entered all_reduce #10 of group 0: stuck in `input`" in window["hang_words"]
        the_job.store.set(key(2, slot), crafted)  # its only row unreadable: it is the rank without a row
        window = {"hang_s": 5.0}
        assert rank_hangs.JobHang().window(tracer(tmp_path), the_job, window, slot, key)
        assert 1 in window["hang_ranks"], crafted


def test_another_ranks_escape_sequences_reach_the_report_file_escaped(tmp_path):
    report = tmp_path / "report.txt"
    report.write_text("steptrace hang report\n\nhead\n\nEvery thread's stack (as faulthandler writes it):\nstacks\n")
    rank_hangs._add_to_report(str(report), "rank 1 stuck in `\x1b]8;;http://x\x07evil\x1b[2J`\nsecond line")
    text = report.read_text()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b]8;;http://x\\x07evil\\x1b[2j" in text.lower() and "\nsecond line" in text


def test_the_flight_recorders_dump_goes_only_into_a_folder_of_this_users(tmp_path, monkeypatch, capsys):
    """torch's torchfrtrace reads the dump with pickle.load: in a folder another user can change, they
    could replace it and the operator would run their code."""
    from types import ModuleType

    torch = ModuleType("torch")
    torch._C = SimpleNamespace(_distributed_c10d=SimpleNamespace(_dump_fr_trace=lambda: b"pickled"))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    mine = tmp_path / "caps"
    first = rank_hangs._flight_recorder(str(mine), 0)
    second = rank_hangs._flight_recorder(str(mine), 0)  # a second hang's dump keeps the first
    assert first.endswith(".pkl") and second != first and Path(first).read_bytes() == b"pickled"
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "²")
    assert rank_hangs._flight_recorder(str(mine), 0) == ""  # not a size: not asked
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2000")
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    assert rank_hangs._flight_recorder(str(open_to_all), 0) == ""
    assert list(open_to_all.iterdir()) == []
    assert "Flight Recorder's dump is not written" in capsys.readouterr().err
    if os.geteuid() == 0:  # another user's folder (a shared working folder's steptrace-captures)
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        assert rank_hangs._flight_recorder(str(theirs), 0) == ""
        assert list(theirs.iterdir()) == []
        assert "belongs to another user (uid 65534)" in capsys.readouterr().err


def test_a_rank_whose_clock_is_hours_behind_but_moves_is_not_gone_and_one_that_stopped_is(tmp_path):
    """Slots come from each process's wall clock: a rank 1,080 slots behind (3 hours at 10 s) whose
    slot still moves each window is alive and judged; once its slot stays put three windows, gone."""
    hang = rank_hangs.JobHang()
    core = tracer(tmp_path)
    behind = 1080
    the_job, _ = job(0, 3, {})
    said = []
    for slot in range(100, 108):
        moving = slot < 104  # rank 2 stops after slot 103
        at = (slot if moving else 103) - behind
        for r, (s, text) in {
            0: (slot, row(0, 3, "compute", 10, False)),
            1: (slot, row(1, 3, "input", 9, True)),
            2: (at, row(2, 3, "compute", 10, False, host="elsewhere")),
        }.items():
            the_job.store.set(key(r, s), f"{s} {text}")
        window = {"hang_s": 5.0}
        hang.window(core, the_job, window, slot, key)
        said.append(window.get("hang_ranks"))
    assert all(r == [1] for r in said[1:4]), said  # rank 2 moving: alive, rank 1 the culprit
    assert said[-1] is not None and 2 in said[-1], said  # stopped three windows: gone
