"""The main demo: a small real PyTorch training loop, run in pairs of scenarios, each pair
showing a cause the tracer diagnoses and the fix that moves the numbers.

    python -m steptrace.demo            # what `bash scripts/demo` runs
    python -m steptrace.demo --quick    # fewer steps

CPU scenarios: slow input (INPUT-BOUND, then workers), per-step logging and metrics
(WAIT-HEAVY, then every 50 steps). GPU scenarios (pageable vs pinned copies, tiny kernels, a
healthy loop) run only where CUDA is available.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import steptrace
import steptrace.torch as st
from steptrace import _core


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _torch():
    import torch

    return torch


def make_dataset(size: int, read_ms: float, decode_ms: float, features: int = 512):
    """Samples that are read from slow storage (a sleep: latency, no CPU) then decoded (CPU)."""
    torch = _torch()
    from torch.utils.data import Dataset

    class SlowStorageDataset(Dataset):
        def __init__(self) -> None:
            self.samples = torch.randn(min(size, 1024), features, generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return size

        def __getitem__(self, i: int):
            if read_ms:
                time.sleep(read_ms / 1000)
            if decode_ms:
                _busy(decode_ms / 1000)
            return self.samples[i % len(self.samples)], i % 10

    return SlowStorageDataset()


def make_model(features: int = 512, hidden: int = 1024):
    torch = _torch()
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10),
    )


@dataclass
class Scenario:
    name: str
    label_expected: Optional[str]
    summary: Optional[steptrace.Summary] = None
    seconds: float = 0.0

    def share(self, phase: str) -> float:
        assert self.summary is not None
        return self.summary.to_dict()["phases"].get(phase, {}).get("share", 0.0)

    def step_ms(self) -> float:
        assert self.summary is not None
        return self.summary.to_dict()["step_ms"]["mean"]


def train(
    tracer: steptrace.Tracer,
    *,
    steps: int,
    batch_size: int = 32,
    num_workers: int = 0,
    read_ms: float = 0.0,
    decode_ms: float = 0.0,
    log_every: int = 0,
    device: str = "cpu",
    pin_memory: bool = False,
) -> None:
    """A real training loop over a synthetic dataset, traced the way a user would trace it."""
    torch = _torch()
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    extra = dict(persistent_workers=True, prefetch_factor=4) if num_workers else {}
    loader = DataLoader(
        make_dataset(steps * batch_size, read_ms, decode_ms),
        batch_size=batch_size,
        num_workers=num_workers,
        pin_memory=pin_memory,
        **extra,
    )
    held_out = torch.randn(512, 512, device=device)
    log = io.StringIO()
    for i, (x, y) in enumerate(tracer.steps(st.instrument(loader, tracer))):
        x, y = st.to_device((x, y), device, tracer=tracer)
        with tracer.phase("compute"):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        if log_every and i % log_every == 0:
            # Logging as many loops do it: .item() on the loss, a metric on held-out data, a line.
            with torch.no_grad():
                metric = model(held_out).softmax(-1).max(-1).values.mean()
            log.write(json.dumps({"step": i, "loss": loss.item(), "confidence": metric.item()}) + "\n")


def _workers() -> int:
    return _core.suggested_loader_workers()  # what the INPUT-BOUND advice says to try


def cpu_pairs(steps: int) -> List[tuple]:
    """(before, after, run-before, run-after) for the scenarios that need no GPU."""
    workers = _workers()
    return [
        (
            Scenario("slow input, num_workers=0", "INPUT-BOUND"),
            Scenario(f"{workers} workers, persistent, prefetch 4", None),
            lambda t: train(t, steps=steps, read_ms=0.45, decode_ms=0.05),
            lambda t: train(t, steps=steps, read_ms=0.45, decode_ms=0.05, num_workers=workers),
        ),
        (
            Scenario("log + metric every step", "WAIT-HEAVY"),
            Scenario("log + metric every 50 steps", None),
            lambda t: train(t, steps=steps, log_every=1),
            lambda t: train(t, steps=steps, log_every=50),
        ),
    ]


def everything_at_once(tracer: steptrace.Tracer, *, steps: int) -> None:
    """A loop as people write them: slow input, validation every 20 steps, a checkpoint every
    50, logging every 10. Validation, checkpoints and logging are set aside with
    ``exclude()``: the label names the real bottleneck, and their cost is reported apart."""
    torch = _torch()
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    loader = DataLoader(make_dataset(steps * 32, 0.45, 0.05), batch_size=32)
    val_loader = DataLoader(make_dataset(4 * 32, 0.0, 0.05), batch_size=32)
    log = io.StringIO()
    for i, (x, y) in enumerate(tracer.steps(st.instrument(loader, tracer))):
        with tracer.phase("compute"):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        if i % 10 == 9:
            with tracer.exclude("logging"):
                log.write(json.dumps({"step": i, "loss": loss.item()}) + "\n")
        if i % 20 == 19:
            with tracer.exclude("validation"), torch.no_grad():
                for vx, vy in val_loader:
                    loss_fn(model(vx), vy)
        if i % 50 == 49:
            with tracer.exclude("checkpoint"):
                buffer = io.BytesIO()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)
                _busy(0.05)  # the write to slow storage


def copy_loop(tracer: steptrace.Tracer, *, steps: int, pinned: bool) -> None:
    """Large batches copied to the GPU from pageable memory, or pinned with non_blocking=True. The
    batch (64 MiB) is large beside the model's work on it, so the copy is the step on any GPU: on
    an H100 a 4 MiB batch took a quarter of the step, and launches the rest."""
    torch = _torch()
    model = make_model(4096).cuda()
    batch = torch.randn(4096, 4096)  # 64 MiB: 16 slices of 256 rows
    if pinned:
        batch = batch.pin_memory()
    for _ in tracer.steps(range(steps)):
        x = st.to_device(batch, "cuda", non_blocking=pinned, tracer=tracer)
        with tracer.phase("compute"):
            model(x[:256]).sum().backward()


def tiny_kernels(tracer: steptrace.Tracer, *, steps: int, fused: bool) -> None:
    """Thousands of tiny element-wise kernels a step, or the same arithmetic on one large tensor."""
    torch = _torch()
    xs = [torch.randn(64, device="cuda") for _ in range(500)]
    big = torch.randn(500, 64, device="cuda")
    for _ in tracer.steps(range(steps)):
        with tracer.phase("compute"):
            if fused:
                for _ in range(4):
                    big = (big * 1.0001).tanh_()
            else:
                for x in xs:
                    x.mul_(1.0001).tanh_()
            torch.cuda.synchronize()  # the loss read a real loop makes, inside its compute


def healthy(tracer: steptrace.Tracer, *, steps: int, item: bool = False) -> None:
    """Large matmuls. With ``item``, the loss is read every step in a `wait` phase: the host then
    blocks most of each step, but the GPU is busy throughout, so the GPU is the bottleneck."""
    torch = _torch()
    a = torch.randn(4096, 4096, device="cuda")
    for _ in tracer.steps(range(steps)):
        with tracer.phase("compute"):
            for _ in range(8):
                a = torch.mm(a, a).tanh_()
            if not item:
                # Inside `compute`: the host waits for its own matmuls, as a loop that reads its
                # loss does.
                torch.cuda.synchronize()
        if item:
            with tracer.phase("wait"):
                a.sum().item()


def gpu_pairs(steps: int) -> List[tuple]:
    """The scenarios that need a GPU (run only where CUDA is available)."""
    return [
        (
            Scenario("pageable copies", "H2D-BOUND"),
            Scenario("pinned, non_blocking", None),
            lambda t: copy_loop(t, steps=steps, pinned=False),
            lambda t: copy_loop(t, steps=steps, pinned=True),
        ),
        (
            Scenario("1000 tiny kernels a step", "LAUNCH-BOUND"),
            Scenario("the same work on one tensor", None),
            lambda t: tiny_kernels(t, steps=steps, fused=False),
            lambda t: tiny_kernels(t, steps=steps, fused=True),
        ),
        (
            Scenario("large matmuls", "COMPUTE-BOUND"),
            Scenario("large matmuls, .item() every step", "COMPUTE-BOUND"),
            lambda t: healthy(t, steps=steps),
            lambda t: healthy(t, steps=steps, item=True),
        ),
    ]


def run(scenario: Scenario, body: Callable[[steptrace.Tracer], None]) -> Scenario:
    tracer = steptrace.Tracer(print_at_exit=False, warmup_steps=5)
    start = time.perf_counter()
    body(tracer)
    scenario.seconds = time.perf_counter() - start
    scenario.summary = tracer.summary()
    return scenario


def _timing(scenario: Scenario) -> str:
    """The scenario's whole time next to the table's wall time, which covers counted steps only."""
    d = scenario.summary.to_dict()
    return (
        f"{scenario.seconds:.1f} s in all; the table's wall time, {d['wall_ms'] / 1000:.1f} s, spans its "
        f"{d['steps']} counted steps, without model setup, loader start-up and warm-up"
    )


def side_by_side(a: Scenario, b: Scenario) -> str:
    rows = [
        ("label", a.summary.label, b.summary.label),
        ("step mean", f"{a.step_ms():.2f} ms", f"{b.step_ms():.2f} ms"),
    ]
    for phase in ("input", "h2d", "compute", "other"):
        rows.append((f"{phase} share", f"{100 * a.share(phase):.1f}%", f"{100 * b.share(phase):.1f}%"))
    width = max(len(a.name), len(b.name), 12)
    out = [f"  {'':<14}{a.name:<{width + 3}}{b.name}"]
    out += [f"  {k:<14}{str(x):<{width + 3}}{y}" for k, x, y in rows]
    return "\n".join(out)


def write_asked_files(summary: steptrace.Summary) -> None:
    """The files asked for with STEPTRACE_JSON / STEPTRACE_TRACE / STEPTRACE_HTML (or configure),
    from the last scenario: each scenario has a tracer of its own, so the default tracer's exit
    report, which would write them, has no steps here."""
    options = steptrace.default_tracer().options()
    for option, write in (
        ("json_path", summary.to_json),
        ("trace_path", summary.to_trace),
        ("html_path", summary.to_html),
    ):
        if options[option]:
            write(options[option])
            print(f"wrote {options[option]} ({option}): the last scenario's summary")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m steptrace.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    args = parser.parse_args(argv)
    torch = _torch()
    torch.set_num_threads(1)  # leave a core for loader workers on small machines
    steps = 60 if args.quick else 150
    steptrace.configure(print_at_exit=False)  # each scenario prints its own summary

    pairs = cpu_pairs(steps) + (gpu_pairs(steps) if torch.cuda.is_available() else [])
    for before, after, run_before, run_after in pairs:
        for scenario, body in ((before, run_before), (after, run_after)):
            run(scenario, body)
            print(f"\n### {scenario.name}  ({_timing(scenario)})\n")
            print(scenario.summary)
        print(f"### side by side\n\n{side_by_side(before, after)}\n")

    everything = run(
        Scenario(
            "everything at once: slow input, validation every 20 steps, a checkpoint every 50, "
            "logging every 10 (set aside with exclude())",
            "INPUT-BOUND",
        ),
        lambda t: everything_at_once(t, steps=steps),
    )
    print(f"\n### {everything.name}  ({_timing(everything)})\n")
    print(everything.summary)
    write_asked_files(everything.summary)

    if not torch.cuda.is_available():
        print(
            "Needs a GPU, not run here: pageable vs pinned copies (H2D-BOUND), a loop of tiny kernels "
            "(LAUNCH-BOUND), a healthy loop and one reading its loss with .item() every step (both "
            "COMPUTE-BOUND)."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
