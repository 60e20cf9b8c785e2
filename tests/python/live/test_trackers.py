"""Live windows where runs are watched: steptrace.on_window and log_to, with the real tracker
packages (TensorBoard, W&B offline, an MLflow file store) read back by their own readers and held
to the windows' JSONL, which the core writes for the same windows."""

import json
import statistics
import sys

import pytest

import steptrace
from conftest import ROOT, TRACES
from tracker_files import KEYS, holding, jsonl_windows, tensorboard_scalars, truth, wandb_history

LOOP = """
import json, sys, time
import steptrace

def loop(seconds, each=None):
    '''Steps of ~3 ms (1 ms input, 2 ms compute) for `seconds`; each step's length by perf_counter.'''
    took, end = [], time.time() + seconds
    while time.time() < end and (each is None or not each()):
        start = time.perf_counter()
        with steptrace.step():
            with steptrace.phase("input"):
                time.sleep(0.001)
            with steptrace.phase("compute"):
                time.sleep(0.002)
        took.append(time.perf_counter() - start)
    return took
"""


def check_against_jsonl(points, lines, key="steptrace/step_p50_ms"):
    """Each window a tracker holds is the JSONL's window of the same rank; at most the last one is
    missing (its line is written before it reaches a listener), and one may follow them: the run's
    last window, which reaches the listeners at exit, after the loop turned the JSONL off. Only
    the windows whose figures include `key` are in its series."""
    lines = holding(lines, key)
    assert len(lines) >= 2
    assert len(lines) - 1 <= len(points) <= len(lines) + 1, (len(points), len(lines))  # all, with the trackers
    for got, line in zip(points, lines):
        assert got == pytest.approx(truth(line)[key], rel=1e-6)


def test_on_window_gets_each_window_as_the_jsonl_has_it(run_python, tmp_path):
    jsonl, out = tmp_path / "live.jsonl", tmp_path / "got.json"
    run_python(
        LOOP
        + f"""
steptrace.configure(live=1, jsonl_path={str(jsonl)!r}, print_at_exit=False)
got, threads = [], set()
steptrace.on_window(lambda w: (got.append(w), threads.add(__import__('threading').get_ident())))
loop(3.5)
time.sleep(0.3)
json.dump({{"got": got, "loop_thread": __import__('threading').get_ident(), "threads": list(threads)}}, open({str(out)!r}, "w"))
"""
    )
    result, lines = json.loads(out.read_text()), jsonl_windows(jsonl)
    got = result["got"]
    assert result["loop_thread"] not in result["threads"]  # never the loop's thread
    for key in KEYS:
        name = key.split("/")[1]
        check_against_jsonl([w[name] for w in got if name in w], lines, key)
    for w, line in zip(got, lines):
        assert w["label"] == line["diagnosis"]["label"]
    # The step axis is the loop's step count: what ended between two windows is the second one.
    for k in range(1, len(got)):
        assert got[k]["step"] - got[k - 1]["step"] == got[k]["steps"] + lines[k]["warmup_steps"]


def test_a_slow_or_failing_listener_never_slows_the_loop_and_its_windows_are_counted(run_python, tmp_path):
    out = tmp_path / "out.json"
    proc = run_python(
        LOOP
        + f"""
steptrace.configure(live=1, print_at_exit=False)
alone = loop(2.0)
steptrace.on_window(lambda w: time.sleep(2))  # a tracker that takes 2 s per window
def fails(w):
    raise RuntimeError("tracker down")
steptrace.on_window(fails)
looked = [0.0]
def dropped():  # a summary at most every 0.2 s: one a step made the loop's thread the CPU's
    # heaviest, and under ten CPU burners the scheduler woke its sleeps later than alone (11-28)
    if time.time() - looked[0] < 0.2:
        return False
    looked[0] = time.time()
    return steptrace.summary().to_dict()["errors"]["windows_dropped"] > 0
beside = loop(30, each=dropped)
s = steptrace.summary()
json.dump({{"alone": alone, "beside": beside, "errors": s.to_dict()["errors"], "table": str(s)}}, open({str(out)!r}, "w"))
"""
    )
    result = json.loads(out.read_text())
    alone, beside = result["alone"], result["beside"]
    # Side by side in one run, truth by perf_counter: the median step is the same, and no step
    # holds a 2 s sleep (a listener on the loop's thread would put one in every second).
    assert statistics.median(beside) <= statistics.median(alone) * 2
    assert max(beside) < 1.0
    assert result["errors"]["windows_dropped"] >= 1
    assert result["errors"]["window_calls_failed"] >= 1
    assert f"live windows: {result['errors']['windows_dropped']} dropped" in result["table"]
    said = [line for line in proc.stderr.splitlines() if "tracker down" in line]
    assert len(said) == 1 and "raised RuntimeError" in said[0], proc.stderr


# MLflow's own default store: sqlite:///mlflow.db in the working folder (its file store now needs
# MLFLOW_ALLOW_FILE_STORE to start); the tracking URI is left unset, as a user leaves it.
MLFLOW_DEFAULT = {"MLFLOW_ENABLE_ASYNC_LOGGING": "false"}


def mlflow_default_store(folder):
    return f"sqlite:///{folder / 'mlflow.db'}"


@pytest.fixture(scope="module")
def three_trackers(tmp_path_factory):
    """One loop logged to TensorBoard, W&B (offline) and MLflow (its default store) at once."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    import subprocess
    import textwrap

    tmp = tmp_path_factory.mktemp("trackers")
    script = tmp / "run.py"
    script.write_text(
        LOOP
        + textwrap.dedent(
            f"""
            import mlflow, wandb
            from torch.utils.tensorboard import SummaryWriter
            steptrace.configure(live=1, jsonl_path={str(tmp / "live.jsonl")!r}, print_at_exit=False)
            run = wandb.init(mode="offline", dir={str(tmp)!r}, project="steptrace-test")
            with mlflow.start_run() as ml:
                steptrace.log_to(SummaryWriter({str(tmp / "tb")!r}))
                steptrace.log_to(run)
                steptrace.log_to(mlflow)
                seen = []  # called after the trackers: a window it has, they have
                steptrace.on_window(lambda w: seen.append((w["steps"], w.get("step_p50_ms"))))
                loop(3.5)
                steptrace.configure(live=3600, jsonl_path="")  # no more lines; the next window is an hour away
                made = len(open({str(tmp / "live.jsonl")!r}).read().splitlines())
                dropped = lambda: steptrace.summary().to_dict()["errors"]["windows_dropped"]
                end = time.time() + 60  # a busy machine's trackers catch up
                while time.time() < end and len(seen) + dropped() < made:
                    time.sleep(0.1)
            run.finish()
            print(json.dumps({{"run_id": ml.info.run_id, "seen": seen, "dropped": dropped()}}))
            """
        )
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("STEPTRACE_")}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(WANDB_SILENT="true", WANDB_DISABLE_GIT="true", **MLFLOW_DEFAULT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # The windows the listeners got, found in the JSONL in order; the others were dropped (the
    # trackers fell behind on a busy machine), counted, or in flight when the view stopped.
    lines, delivered = jsonl_windows(tmp / "live.jsonl"), []
    for steps, p50 in result["seen"]:
        while lines and not (lines[0]["steps"] == steps and (p50 is None or lines[0]["step_ms"]["p50"] == p50)):
            lines.pop(0)
        assert lines, (steps, p50)
        delivered.append(lines.pop(0))
    assert len(jsonl_windows(tmp / "live.jsonl")) - len(delivered) <= result["dropped"] + 1
    return tmp, result["run_id"], delivered


def test_tensorboard_summary_writer_holds_each_window(three_trackers):
    tmp, _, lines = three_trackers
    scalars = tensorboard_scalars(tmp / "tb")
    for key in KEYS:
        check_against_jsonl([value for _, value in scalars[key]], lines, key)
    steps = [step for step, _ in scalars["steptrace/step_p50_ms"]]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # the loop's step count
    labels = scalars["steptrace/label/text_summary"]
    assert labels[0][1][0].decode() == next(line["diagnosis"]["label"] for line in lines if line["diagnosis"]["label"])


def test_wandb_offline_run_holds_each_window(three_trackers):
    tmp, _, lines = three_trackers
    rows = [row for row in wandb_history(tmp / "wandb") if "steptrace/steps" in row]
    for key in KEYS:
        check_against_jsonl([row[key] for row in rows if key in row], lines, key)
    # A window without a label (no counted steps) gives none; the run's last window may follow the
    # JSONL's, or its last be missing.
    got = [row["steptrace/label"] for row in rows if "steptrace/label" in row]
    want = [line["diagnosis"]["label"] for line in lines if line["diagnosis"]["label"]]
    n = min(len(got), len(want))
    assert n >= 2 and got[:n] == want[:n]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # SQLAlchemy 2.1 on MLflow's store queries
def test_mlflow_default_store_holds_each_window(three_trackers):
    import mlflow

    tmp, run_id, lines = three_trackers
    assert (tmp / "mlflow.db").is_file()  # the store MLflow chose by itself
    client = mlflow.tracking.MlflowClient(tracking_uri=mlflow_default_store(tmp))
    for key in KEYS:
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)
        check_against_jsonl([m.value for m in history], lines, key)
    assert client.get_run(run_id).data.tags["steptrace.label"] in steptrace.LABELS


def test_a_tracker_not_installed_is_said_in_one_line_and_the_program_goes_on(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    steptrace.Tracer(print_at_exit=False).log_to("wandb")
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "wandb is not installed" in said[0]


def test_a_window_with_a_device_view_and_gains_gives_them_to_listeners():
    """Live windows of a GPU run hold the device view (tested on the fake CUPTI in C++): a real
    trace's summary, which has one and its gains, becomes the same figures a listener gets."""

    from steptrace._live import windows as _windows

    trace = TRACES / "resnet50_num_workers_0.pt.trace.json.gz"
    d = steptrace.load(trace).to_dict()
    got = _windows.figures(d, 7, 1.5)
    assert got["gpu_busy_share"] == d["gpu"]["busy_share"] > 0
    gains = d["diagnosis"]["gains"]
    assert got["gain_share"] == max(gains.values()) and gains[got["gain_cause"]] == got["gain_share"]
    assert got["label"] == "INPUT-BOUND" and got["label_code"] == 1
    assert _windows.numbers(got)["steptrace/gpu_busy_share"] == got["gpu_busy_share"]
    assert "steptrace/label" not in _windows.numbers(got) and "steptrace/step" not in _windows.numbers(got)


def test_wandb_named_before_its_run_is_said_in_one_line(capsys):
    pytest.importorskip("wandb")
    steptrace.Tracer(print_at_exit=False).log_to("wandb")
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "steptrace warning: log_to('wandb'): no run to log to (call wandb.init() first); no windows go there"
    ]


def test_log_to_names_what_it_cannot_log_to():
    with pytest.raises(TypeError, match="cannot log to a builtins.object"):
        steptrace.Tracer(print_at_exit=False).log_to(object())
    with pytest.raises(ValueError, match="unknown tracker 'neptune'"):
        steptrace.Tracer(print_at_exit=False).log_to("neptune")
    with pytest.raises(TypeError, match="expected a function"):
        steptrace.Tracer(print_at_exit=False).on_window(42)


def test_the_readmes_label_codes_are_the_labels_in_order():

    readme = (ROOT / "docs" / "python.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `label`, `label_code`"))
    codes = [f"{i} {label}" for i, label in enumerate(steptrace.LABELS, 1)]
    assert "0 none, " + ", ".join(codes) in row


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_exits_at_once_and_the_parent_keeps_its_windows(run_python, tmp_path):
    out = tmp_path / "got.json"
    run_python(
        LOOP
        + f"""
import os
steptrace.configure(live=1, print_at_exit=False)
got = []
steptrace.on_window(got.append)
loop(1.5)
pid = os.fork()
if pid == 0:
    loop(0.2)             # records nothing here: the tracer's copy in a child is off
    sys.exit(0)           # runs the atexit hooks, the listeners' stop among them
os.waitpid(pid, 0)
before = len(got)
loop(2.5)
json.dump({{"before": before, "after": len(got)}}, open({str(out)!r}, "w"))
"""
    )
    counts = json.loads(out.read_text())
    assert counts["after"] > counts["before"] >= 1


def test_a_runs_last_window_reaches_listeners_before_the_table_and_live_lines_stop(run_python, tmp_path):
    """No `live` set: windows every 10 s, and a run of 0.3 s. Its one window (all its counted
    steps) reaches on_window and the JSONL at exit, before the table; with live=1 the last
    partial window is the last line, before the table, and nothing follows it."""
    proc = run_python(
        LOOP
        + """
steptrace.on_window(lambda w: print("window", w["steps"], file=sys.stderr, flush=True))
took = loop(0.3)
print(len(took) - 5, file=sys.stderr)  # the counted steps: all but the 5 of warm-up
""",
        env={"STEPTRACE_JSONL": str(tmp_path / "w.jsonl")},
    )
    lines = proc.stderr.splitlines()
    # Windows end at 10 s wall-clock boundaries: a run that crosses one (3% of 0.3 s runs; seen
    # in CI) has a window before its last, and the counted steps are split between the two.
    counted = next(int(line) for line in lines if line.isdigit())
    windows = [i for i, line in enumerate(lines) if line.startswith("window ")]
    steps = [int(lines[i].split()[1]) for i in windows]
    assert 1 <= len(windows) <= 2 and sum(steps) == counted, proc.stderr
    last = windows[-1]  # the run's last window, at exit, then the table
    assert "steptrace summary" in lines[last + 1] and lines[last + 2].startswith(f"{counted} steps"), proc.stderr
    assert [w["steps"] for w in jsonl_windows(tmp_path / "w.jsonl")] == steps
    proc = run_python(LOOP + "loop(1.6)\n", env={"STEPTRACE_LIVE": "1"})
    lines = proc.stderr.splitlines()
    live = [i for i, line in enumerate(lines) if line.startswith("steptrace live")]
    table = next(i for i, line in enumerate(lines) if " steps (" in line)
    assert live and live[-1] < table, proc.stderr  # no live line after the table
    # the windows, the last one partial, hold the run's counted steps between them (but those
    # before the first collector pass, when the first window starts: a few at most); without
    # the last window, its ~0.6 s (~190 steps) would be missing
    in_windows = sum(int(lines[i].split(": ")[1].split()[0]) for i in live)
    counted = int(lines[table].split()[0])
    assert counted - 5 <= in_windows <= counted, proc.stderr


def test_a_listener_that_got_no_window_says_why_in_one_line(run_python):
    proc = run_python(
        LOOP
        + """
steptrace.on_window(lambda w: None)
for _ in range(3):  # all warm-up: nothing counted
    with steptrace.step():
        pass
"""
    )
    said = [line for line in proc.stderr.splitlines() if "no window reached the listeners" in line]
    assert len(said) == 1 and "warmup_steps" in said[0], proc.stderr


def test_log_to_tensorboard_by_name_says_where_the_windows_go(tmp_path, monkeypatch, capfd):
    pytest.importorskip("tensorboard")
    monkeypatch.chdir(tmp_path)  # SummaryWriter's default folder: ./runs/<date>_<host>
    t = steptrace.Tracer(print_at_exit="never")
    t.log_to("tensorboard")
    err = capfd.readouterr().err
    made = [p for p in (tmp_path / "runs").iterdir()]
    assert len(made) == 1 and f"windows go to {made[0].relative_to(tmp_path)}" in err, (made, err)
    assert "tensorboard --logdir runs" in err, err
