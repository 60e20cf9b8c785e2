"""A job's folder of rank traces: ``steptrace.load(folder)``, which reads the files in parallel on
the available cores, against loading the same files one after another, in paired rounds
(benchmarks/paired.py: rotated order, the median of the per-round ratios with the middle half of
the rounds, the load average). Wall time is the figure (what parallel reading buys); process CPU
is printed beside it (what it costs). Target (issue "Cost that holds anywhere"): at most 0.6x the
time one after another on 2 cores.

Each rank is the ResNet-50 sample's steps repeated to --rank-mb of JSON (bench_trace_reader's
make_trace) with its own distributedInfo, as .json and as .json.gz; or give folders of real rank
traces with --folder (each read as it is).

    python benchmarks/bench_rank_parallel.py [--ranks 4 8] [--rank-mb 60] [--rounds 9] [--folder DIR ...]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import steptrace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_trace_reader import make_trace  # noqa: E402
from paired import measure, report  # noqa: E402


def rank_folder(work: Path, ranks: int, rank_mb: float, compressed: bool) -> Path:
    """`ranks` traces of about `rank_mb` MB of JSON each, rank r naming itself in distributedInfo."""
    one = work / "one.json"
    if not one.exists():
        copy = make_trace(1, work / "copy.json")
        (work / "copy.json").unlink()
        make_trace(max(1, round(rank_mb * 1e6 / copy)), one)
    body = one.read_bytes()
    assert body.startswith(b"{")
    folder = work / f"ranks{ranks}{'-gz' if compressed else ''}"
    folder.mkdir(exist_ok=True)
    for r in range(ranks):
        text = b'{"distributedInfo": {"rank": %d, "world_size": %d, "backend": "nccl"}, ' % (r, ranks) + body[1:]
        path = folder / f"rank-{r}.json{'.gz' if compressed else ''}"
        if compressed:
            with gzip.open(path, "wb", compresslevel=6) as f:
                f.write(text)
        else:
            path.write_bytes(text)
    return folder


def compare(folder: Path, rounds: int) -> None:
    files = sorted(str(folder / n) for n in os.listdir(folder))

    def at_once(_n: int) -> None:
        steptrace.load(str(folder))

    def one_after_another(_n: int) -> None:
        for f in files:
            steptrace.load(f)

    rows = measure(
        {"one after another": one_after_another, "load(folder)": at_once},
        baseline="one after another",
        n=1,
        rounds=rounds,
    )
    size = sum(os.path.getsize(f) for f in files)
    print(
        f"\n{folder.name}: {len(files)} files, {size / 1e6:.0f} MB on disk, {len(os.sched_getaffinity(0))} usable cores"
    )
    print(report(rows, "one after another", {"load(folder)": 0.6}, clock="wall"))
    # What the cores allow: the folder's CPU time spread over every core, against the serial wall
    # time. A .json.gz read alone already inflates on a second core (byte_source.cpp's read-ahead),
    # so its serial time is below its CPU time and this bound is above 0.5x.
    cores = len(os.sched_getaffinity(0))
    bound = (
        statistics.median(rows["load(folder)"]["process"])
        / cores
        / statistics.median(rows["one after another"]["wall"])
    )
    serial_cores = statistics.median(rows["one after another"]["process"]) / statistics.median(
        rows["one after another"]["wall"]
    )
    print(
        f"  the best {cores} cores allow: {bound:.2f}x (the folder's CPU time over {cores} cores; "
        f"one after another already keeps {serial_cores:.2f} cores busy)"
    )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    p.add_argument("--rank-mb", type=float, default=60, help="JSON size of each made rank trace")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--folder", nargs="*", default=[], help="folders of real rank traces, read as they are")
    args = p.parse_args()
    print(f"steptrace.load(folder) against one file after another, {args.rounds} paired rounds")
    for folder in args.folder:
        compare(Path(folder), args.rounds)
    if args.folder:
        return 0
    work = Path(tempfile.mkdtemp(prefix="steptrace-ranks-"))
    try:
        for ranks in args.ranks:
            for compressed in (False, True):
                compare(rank_folder(work, ranks, args.rank_mb, compressed), args.rounds)
    finally:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
