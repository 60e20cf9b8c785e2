"""A CPU-only training-like loop whose input is slow: steptrace says INPUT-BOUND.

Each batch is "decoded" on the training thread (a busy loop standing in for JPEG decoding and
augmentation), then a small "model" runs. Run it: python examples/input_bound.py
"""

import time

import steptrace


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def decoded_batches(n: int):
    for i in range(n):
        busy(0.006)  # decode + augment + collate, on the training thread
        yield i


def main() -> None:
    for batch in steptrace.steps(decoded_batches(60)):  # fetching a batch is the `input` phase
        with steptrace.phase("h2d"):
            busy(0.0004)
        with steptrace.phase("compute"):
            busy(0.002)
    # The summary prints when the program exits.


if __name__ == "__main__":
    main()
