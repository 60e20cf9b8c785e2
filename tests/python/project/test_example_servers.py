"""The two example servers (examples/server/batching_server.cpp, examples/asyncio_server.py) under
concurrent load: no request lost or mixed, batches formed, /metrics identical for two scrapers and
agreeing with the end-of-run JSON, and each phase's p50 against the truth the server stamped beside
it (its replies carry its own clock's figures)."""

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import steptrace
from conftest import ROOT  # noqa: E402

CLIENTS, PER_CLIENT, MAX_BATCH = 16, 25, 8
WARMUP = 5  # the default: the first requests to end, and the first batches, are not counted


@pytest.fixture(scope="module")
def batching_server_binary(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    build = tmp_path_factory.mktemp("server-build")
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
    subprocess.run(["cmake", "--build", str(build), "--target", "batching_server"], check=True, capture_output=True)
    return build / "batching_server"


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as r:
        return r.read().decode()


def _counts(text: str) -> tuple:
    """(requests, batches) counted, from a /metrics scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    return samples["server_steps_total"], samples["server_batches_total"]


def _serve_under_load(command: list) -> dict:
    """Starts the server, sends CLIENTS x PER_CLIENT concurrent /infer requests, scrapes /metrics
    twice, stops it; returns what each part gave."""
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("STEPTRACE_")}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stdout.readline()
        assert first.startswith("listening on 127.0.0.1:"), first + proc.stderr.read()
        port = int(first.rsplit(":", 1)[1])
        replies, errors = [], []

        def client() -> None:
            try:
                for _ in range(PER_CLIENT):
                    replies.append(_get(port, "/infer"))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        clients = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        # A batch step ends just after its replies are out: under load the last one can still be
        # running when its clients have their replies. Scrape until two in a row, 0.5 s apart,
        # agree (at most 20 s).
        scrapes = [_get(port, "/metrics")]
        for _ in range(40):
            time.sleep(0.5)
            scrapes.append(_get(port, "/metrics"))
            if _counts(scrapes[-1]) == _counts(scrapes[-2]):
                break
        scrapes = scrapes[-2:]
        _get(port, "/quit")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):  # a server that failed leaves no open pipe behind
            pipe.close()
    assert not errors, errors
    assert proc.returncode == 0, err
    return {"replies": replies, "scrapes": scrapes, "summary": json.loads(out), "table": err}


def _check(result: dict, calls: dict) -> None:
    """calls: each phase's calls per request."""
    n = CLIENTS * PER_CLIENT
    replies = [r.split() for r in result["replies"]]
    assert len(replies) == n and all(r[0] == "ok" for r in replies)
    d = result["summary"]
    # No request lost or mixed: every request is a step, each phase once per step.
    assert d["requests"] == d["steps"] == n - WARMUP
    assert set(d["errors"].values()) == {0}, d["errors"]
    for name, per_request in calls.items():
        assert d["phases"][name]["calls"] == per_request * d["steps"], name
    # Batches formed under load, never above the limit, and they served every request.
    b = d["batches"]
    assert 1 < b["size"]["max"] <= MAX_BATCH
    assert b["batches"] * b["size"]["mean"] == pytest.approx(n - WARMUP, abs=MAX_BATCH * WARMUP)
    # Each phase's p50 against the truth the server stamped beside its records (us in the reply).
    # The replies include the warm-up requests steptrace leaves out, and batch sizes make the
    # times cluster 0.1 ms apart, so the p50 of the two sets can sit in neighbouring clusters:
    # steptrace's p50 must lie within the truth's 45th to 55th percentiles (5% + 20 us).
    for column, name in enumerate(("queue", "preprocess", "inference"), start=1):
        truth = sorted(float(r[column]) / 1e3 for r in replies)
        low, high = truth[int(0.45 * len(truth))], truth[int(0.55 * len(truth))]
        got = d["phases"][name]["p50_ms"]
        assert 0.95 * low - 0.02 <= got <= 1.05 * high + 0.02, (name, got, low, statistics.median(truth), high)
    # Two scrapes read the same counts, which are the run's.
    counts = [_counts(text) for text in result["scrapes"]]
    assert counts[0] == counts[1] == (d["steps"], b["batches"])
    assert "queue" in result["table"] and "batch" in result["table"]


def test_the_cpp_batching_server_under_concurrent_load(batching_server_binary):
    result = _serve_under_load([str(batching_server_binary), "0", str(MAX_BATCH), "2000"])
    _check(result, {"queue": 2, "preprocess": 1, "inference": 1, "respond": 1})  # queued for the pool, then a batch


def test_the_asyncio_server_under_concurrent_load():
    result = _serve_under_load([sys.executable, str(ROOT / "examples" / "asyncio_server.py"), "0", str(MAX_BATCH), "2"])
    _check(result, {"queue": 1, "preprocess": 1, "inference": 1})
