"""Periodic work is named with its period: a loop that checkpoints every 10th step between its
phases is told "1 step in 10 carries N ms more", never to remove per-step syncs. The checkpoint's
length is stamped by the test's own clock beside the records."""

import statistics
import time

from conftest import spin


def test_a_checkpoint_every_10_steps_is_periodic_work(tracer, tmp_path):
    stamped = []
    for i in range(80):
        with tracer.step():
            with tracer.phase("compute"):
                spin(0.001)
            if i % 10 == 9:  # between phases: `other`
                t0 = time.perf_counter()
                (tmp_path / "checkpoint.bin").write_bytes(b"\0" * 65536)
                time.sleep(0.03)
                stamped.append((time.perf_counter() - t0) * 1000)
    diag = tracer.summary().to_dict()["diagnosis"]
    assert diag["periodic"], diag["evidence"]
    p = diag["periodic"][0]
    assert p["phase"] == "other"
    assert p["every"] == 10
    truth = statistics.median(stamped)
    # The recorded time outside every phase holds the stamped checkpoint, and at most a
    # preemption's worth more; a wrong period would put it off by a factor of two.
    assert truth - 0.1 <= p["excess_ms"] < truth + 20
    # On a busy host the oversubscribed host is said first (cpu_findings); the cause's first fix next.
    host = ("free the cores first", "run fewer threads of its own first")
    causes = [a for a in diag["advice"] if not a.startswith(host)]
    assert causes[0].startswith("1 step in 10 carries")
    assert not any(".item()" in a for a in diag["advice"])
    syncs = [h for h in diag["hypotheses"] if h["fix"] == "per-step host syncs"]
    assert syncs and not syncs[0]["holds"]
