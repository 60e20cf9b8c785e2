"""Helpers for the tests that run real multi-process jobs (tests/python/ranks): a free port, the
jobs' environment, torch's teardown abort, and rank 0's combined summary."""

import json
import os
import socket
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env.update({"OMP_NUM_THREADS": "1", "STEPTRACE_LOG_LEVEL": "warn"})
    env.update(extra or {})
    return env


# torch's gloo teardown at exit sometimes aborts a process after everything else ran (seen with
# steptrace not even imported: benchmarks/bench_ranks.py's plain runs); every file and line
# checked here is written before that.
TORCH_EXIT_ABORT = "terminate called without an active exception"


def ok(rc: int, err: str) -> bool:
    return rc == 0 or (rc == -6 and err.rstrip().endswith(TORCH_EXIT_ABORT))


def combined(path: Path) -> dict:
    doc = json.loads(path.read_text())
    assert doc["rank"]["rank"] == 0 and "ranks" in doc, doc.keys()
    return doc
