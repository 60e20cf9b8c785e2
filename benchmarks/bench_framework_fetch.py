"""What the framework callbacks add to each batch fetch, side by side in one run: a DataLoader's
next() as it is, and while a Lightning / Hugging Face loop times it as `input` (the wrapper
around torch's iterator that steptrace.lightning and steptrace.transformers install for the
length of a fit). batch_size=1 over a tiny tensor dataset, so the fetch itself is as cheap as a
DataLoader fetch gets and the wrapper's cost is as large a share as it can be. Rounds alternate
the two; each figure is the median over rounds."""

import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import steptrace
from steptrace._frameworks.hooks import LoopMarks

FETCHES, ROUNDS = 2000, 9
dataset = TensorDataset(torch.zeros(FETCHES + 1, 4))


def us_per_fetch() -> float:
    it = iter(DataLoader(dataset, batch_size=1))
    start = time.perf_counter()
    for _ in range(FETCHES):
        next(it)
    return (time.perf_counter() - start) / FETCHES * 1e6


marks = LoopMarks(steptrace.Tracer(print_at_exit=False))
plain, timed = [], []
for _ in range(ROUNDS):
    plain.append(us_per_fetch())
    marks.time_fetches()  # as on_fit_start does; the fetch then falls between two steps
    marks.compute_begins()
    marks.compute_ends()
    timed.append(us_per_fetch())
    marks.loop_ends()
    marks.restore()
p, t = statistics.median(plain), statistics.median(timed)
print(f"framework fetch (DataLoader next(), batch_size=1), median of {ROUNDS} rounds x {FETCHES}:")
print(f"  as it is {p:.2f} us, timed as `input` {t:.2f} us: +{t - p:.2f} us a fetch ({t / p:.3f}x)")
