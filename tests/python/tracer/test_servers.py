"""Servers: steps that belong to asyncio tasks, batches, metrics. Ground truth is
time.perf_counter, stamped right beside each phase boundary."""

import asyncio
import statistics
import time

import pytest

import steptrace
from conftest import spin


def test_200_concurrent_coroutines_are_200_steps_with_their_own_phases(tracer):
    truth = {"parse": [], "fetch": [], "respond": []}

    async def handle(i: int) -> None:
        with tracer.step():
            with tracer.phase("parse"):
                a = time.perf_counter()
                spin(0.0003 * (1 + i % 3))  # 0.3, 0.6 or 0.9 ms, no await: no other task runs
                truth["parse"].append(time.perf_counter() - a)
            with tracer.phase("fetch"):  # other tasks run during the awaits
                a = time.perf_counter()
                await asyncio.sleep(0.002 + 0.001 * (i % 4))
                await asyncio.sleep(0)
                truth["fetch"].append(time.perf_counter() - a)
            await asyncio.sleep(0)
            with tracer.phase("respond"):
                a = time.perf_counter()
                spin(0.0005)
                await asyncio.sleep(0)
                truth["respond"].append(time.perf_counter() - a)

    async def main() -> None:
        await asyncio.gather(*(handle(i) for i in range(200)))

    asyncio.run(main())
    d = tracer.summary().to_dict()
    assert d["steps"] == 200
    assert d["requests"] == 200
    assert d["errors"]["unbalanced_phases"] == 0
    phases = d["phases"]
    for name, stamped in truth.items():
        assert phases[name]["calls"] == 200, name  # none charged to another task
        want = statistics.median(stamped) * 1e3
        got = phases[name]["p50_ms"]
        assert abs(got - want) <= 0.05 * want, (name, got, want)


def test_a_second_step_in_the_same_task_is_a_clear_error_and_other_tasks_go_on(tracer):
    async def nested() -> None:
        with tracer.step():
            with pytest.raises(steptrace.StepError, match="already open in this task"):
                with tracer.step():
                    pass

    async def main() -> None:
        await asyncio.gather(nested(), nested())

    asyncio.run(main())
    assert tracer.summary().steps == 2


def test_a_task_step_fails_on_an_exception_or_cancellation_which_propagate_unchanged(tracer):
    class Boom(Exception):
        pass

    async def fails() -> None:
        with tracer.step():
            await asyncio.sleep(0)
            raise Boom()

    async def waits() -> None:
        with tracer.step():
            await asyncio.sleep(10)

    async def main() -> None:
        with pytest.raises(Boom):
            await fails()
        task = asyncio.ensure_future(waits())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with tracer.step():
            pass

    asyncio.run(main())
    d = tracer.summary().to_dict()
    assert (d["steps"], d["failed_steps"]) == (1, 2)
    assert d["errors"]["requests_abandoned"] == 0


def test_work_handed_to_a_thread_with_to_thread_stays_in_the_request(tracer):
    def blocking() -> None:
        with tracer.phase("decode"):
            time.sleep(0.002)

    async def handle() -> None:
        with tracer.step():
            await asyncio.to_thread(blocking)  # copies the task's context into the thread

    async def main() -> None:
        await asyncio.gather(*(handle() for _ in range(8)))

    asyncio.run(main())
    d = tracer.summary().to_dict()
    assert d["steps"] == 8 and d["phases"]["decode"]["calls"] == 8
    assert d["unscoped_phases"] == {}


def test_decorated_coroutines_are_steps_and_phases(tracer):
    @tracer.phase("work")
    async def work() -> None:
        await asyncio.sleep(0.001)

    @tracer.step
    async def handle() -> None:
        await work()

    async def main() -> None:
        await asyncio.gather(*(handle() for _ in range(5)))

    asyncio.run(main())
    d = tracer.summary().to_dict()
    assert d["steps"] == 5
    assert d["phases"]["work"]["calls"] == 5


def test_a_batch_step_is_counted_apart_with_its_size(tracer):
    async def worker() -> None:
        for size in (2, 4, 4, 8):
            with tracer.step(batch=size):
                with tracer.phase("inference"):
                    await asyncio.sleep(0.001)

    asyncio.run(worker())
    d = tracer.summary().to_dict()
    assert d["steps"] == 0
    b = d["batches"]
    assert (b["batches"], b["size"]["max"], b["size"]["p50"]) == (4, 8, 4)
    assert b["size"]["mean"] == pytest.approx(4.5)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        tracer.step(batch=0)


def test_threads_outside_an_event_loop_keep_their_own_steps(tracer):
    with tracer.step():
        with pytest.raises(steptrace.StepError, match="already open on this thread"):
            with tracer.step():
                pass
    d = tracer.summary().to_dict()
    assert d["steps"] == 1 and d["requests"] == 0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_prometheus_scraping_every_second_rates_the_true_request_rate(tracer, tmp_path):
    """Debian's prometheus scrapes /metrics every second as two jobs (two scrapers): rate()
    within 2% of the true rate, no counter resets, and the two agree."""
    import http.server
    import json
    import shutil
    import subprocess
    import threading
    import urllib.parse
    import urllib.request

    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (scripts/test installs Debian's package)"

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = tracer.metrics().prometheus("app").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{server.server_address[1]}"
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
        + "".join(f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n" for job in ("a", "b"))
    )
    api_port = _free_port()
    prom = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{api_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    done = []  # the truth: when each request ended, by the test's own clock
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            with tracer.step():
                with tracer.phase("inference"):
                    time.sleep(0.004)
            done.append(time.time())

    def query(expr: str, at: float, raw: bool = False) -> dict:
        url = f"http://127.0.0.1:{api_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": at})
        with urllib.request.urlopen(url, timeout=10) as r:
            data = json.load(r)["data"]["result"]
        if raw:  # a range selector: each job's samples, [(timestamp, value)]
            return {s["metric"].get("job"): [(float(t), float(v)) for t, v in s["values"]] for s in data}
        return {s["metric"].get("job"): float(s["value"][1]) for s in data}

    workers = [threading.Thread(target=load) for _ in range(2)]
    try:
        # Prometheus settles first (its start-up takes the CPU for seconds on a small machine,
        # delaying the scrapes it times): both jobs up and scraped a few times before the load.
        ready = time.time() + 60
        while time.time() < ready:
            try:
                if (
                    query("count_over_time(up[10s])", time.time()).get("a", 0) >= 3
                    and query("count_over_time(up[10s])", time.time()).get("b", 0) >= 3
                ):
                    break
            except OSError:  # its API is not listening yet
                pass
            time.sleep(0.5)
        for w in workers:
            w.start()
        time.sleep(26)
        at = time.time() - 1  # every scrape up to here has landed
        stop.set()
        for w in workers:
            w.join()
        time.sleep(1.5)
        span = 20
        truth = sum(1 for t in done if at - span < t <= at) / span
        rates = query(f"rate(app_steps_total[{span}s])", at)
        samples = query(f"app_steps_total[{span}s]", at, raw=True)
        resets = query("resets(app_steps_total[25s])", at)
        quantile = query('app_step_seconds{quantile="0.5"}', at)
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        server.shutdown()
        server.server_close()
    assert set(rates) == {"a", "b"} == set(samples), rates
    # Between its first and last sample in the window, each scraper's counter grew by exactly the
    # requests that ended meanwhile (within 2%: a scrape's timestamp is when it began, the figures
    # when steptrace answered), which is what makes rate() right.
    for job, points in samples.items():
        (t1, v1), (tn, vn) = points[0], points[-1]
        assert tn - t1 >= span / 2, (job, points)  # most of the window was scraped
        ended = sum(1 for t in done if t1 < t <= tn)
        assert abs((vn - v1) - ended) <= 0.02 * ended, (job, vn - v1, ended)
    # rate() over the window: within 2% of the true rate when every scrape landed; a scrape missed
    # at the window's edge (a busy machine) makes Prometheus extrapolate less, by up to half an
    # interval in 20 s, so the bound allows that and no more.
    for job, rate in rates.items():
        edge_slack = 0.5 / span if (samples[job][0][0] - (at - span) > 1.1 or at - samples[job][-1][0] > 1.1) else 0
        assert abs(rate - truth) <= (0.02 + edge_slack) * truth, (
            job,
            rate,
            truth,
            samples[job][0][0],
            samples[job][-1][0],
        )
    assert abs(rates["a"] - rates["b"]) <= 0.05 * truth
    assert resets == {"a": 0.0, "b": 0.0}
    assert all(0.004 <= q < 0.5 for q in quantile.values()), quantile  # seconds, of the recent window
