"""Cost per rank with 1, 2 and 4 ranks: a small DDP job on CPU (gloo), run with steptrace
(steps(), a compute phase, DDP's wait timed, the gather at exit) and without it (the same loop,
steptrace never imported), interleaved, side by side. Prints the median step time of each, the
difference per step, the gather's time on rank 0 and the payload each rank sends.

    .venv/bin/python benchmarks/bench_ranks.py [--steps 400] [--repeats 3]

One rank per process; on a 2-core machine 4 ranks share the cores, so compare the columns of
one row, not the rows."""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

JOB = textwrap.dedent(
    """
    import json, os, sys, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    traced = sys.argv[1] == "traced"
    steps = int(sys.argv[2])
    if traced:
        import steptrace
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [torch.randn(16, 64) for _ in range(steps)]
    stamps = []
    def train(x):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    if traced:
        for x in steptrace.steps(data):
            stamps.append(time.perf_counter())
            with steptrace.phase("compute"):
                train(x)
    else:
        for x in data:
            stamps.append(time.perf_counter())
            train(x)
    gaps = [b - a for a, b in zip(stamps[50:], stamps[51:])]
    out = {"median_step_us": 1e6 * sorted(gaps)[len(gaps) // 2]}
    if traced:
        t0 = time.perf_counter()
        s = steptrace.summary(gather=True)
        out["gather_ms"] = 1e3 * (time.perf_counter() - t0)
        from steptrace import _core
        from steptrace._ranks import collective as _collective
        from steptrace._ranks import gather as _ranks
        core = _core.default_tracer()
        out["payload_bytes"] = len(_ranks.payload(core.summary(), *_collective.recent_waits(core)))
    print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()
    """
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(script: str, world: int, traced: bool, steps: int) -> list:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPTRACE_")}
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "STEPTRACE_PRINT_AT_EXIT": "never",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world),
        }
    )
    procs = [
        subprocess.Popen(
            [sys.executable, script, "traced" if traced else "plain", str(steps)],
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if "RESULT " not in out:
            raise SystemExit(f"a rank failed ({p.returncode}):\n{err}")
        if p.returncode != 0:  # after its result: torch's gloo teardown at exit aborts now and then
            aborts.append(
                f"{'traced' if traced else 'plain'}, {world} ranks: exit status {p.returncode}, "
                f"{err.strip().splitlines()[-1] if err.strip() else ''}"
            )
        results.append(json.loads(out.split("RESULT ", 1)[1]))
    return results


aborts: list = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "job.py")
        with open(script, "w") as f:
            f.write(JOB)
        print(f"{args.steps} steps a run, {args.repeats} runs of each, interleaved; {os.cpu_count()} cores")
        print(
            f"{'ranks':>5} {'plain us/step':>14} {'traced us/step':>15} {'difference':>11} {'per rank':>9} "
            f"{'gather ms (rank 0)':>19} {'payload B/rank':>15}"
        )
        for world in args.ranks:
            plain, traced, gather, payload = [], [], [], []
            for _ in range(args.repeats):
                plain += [r["median_step_us"] for r in run(script, world, False, args.steps)]
                results = run(script, world, True, args.steps)
                traced += [r["median_step_us"] for r in results]
                gather.append(results[0]["gather_ms"])
                payload += [r["payload_bytes"] for r in results]
            p, t = statistics.median(plain), statistics.median(traced)
            print(
                f"{world:>5} {p:>14.1f} {t:>15.1f} {t - p:>+10.1f}us {100 * (t - p) / p:>+8.1f}% "
                f"{statistics.median(gather):>19.2f} {max(payload):>15}"
            )
            time.sleep(0.5)
        for line in aborts:
            print(f"after its result, a rank exited abnormally ({line})")


if __name__ == "__main__":
    main()
