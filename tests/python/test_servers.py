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
