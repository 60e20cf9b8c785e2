"""A toy asyncio inference server with a batching worker, traced by steptrace.

Each connection is one request, one step of its own task: `preprocess` (tokenising, on the event
loop), `queue` (waiting for a batch to start), `inference` (its batch running), `respond`. A
single worker task gathers what has arrived into batches of up to MAX_BATCH, waiting at most
MAX_WAIT after the first, and runs each batch as one step(batch=n) of a small PyTorch model, off
the event loop (asyncio.to_thread), on the GPU when there is one.

    python examples/asyncio_server.py [port] [max_batch] [max_wait_ms]

    GET /infer    one request: "ok <queue us> <preprocess us> <inference us>", stamped by the
                  server's own perf_counter beside steptrace's phases
    GET /metrics  Prometheus text: counts since the start (rate() them), quantiles of the last minute
    GET /quit     stops: the table goes to stderr, the JSON to stdout

It prints "listening on 127.0.0.1:PORT" once it accepts (port 0: the system picks one).
"""

import asyncio
import sys
import time
from typing import List, Tuple

import steptrace

try:
    import torch
except ImportError:  # the server runs without PyTorch too: a spin stands for the model
    torch = None


class Model:
    """A batch of token vectors in, a score each out: a GPU-style call whose cost a batch shares."""

    def __init__(self) -> None:
        self.device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
        if torch is not None:
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1))
            self.net.to(self.device).eval()

    def __call__(self, batch: List[List[float]]) -> List[float]:
        if torch is None:
            _spin(0.0008 + 0.0001 * len(batch))
            return [sum(x) for x in batch]
        with torch.no_grad():
            x = torch.tensor(batch, device=self.device)
            for _ in range(8):  # a few layers' worth of work
                y = self.net(x)
            return y.squeeze(1).cpu().tolist()  # .cpu() waits for the device


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def tokenize(text: bytes) -> List[float]:
    """Stands for real preprocessing: 256 features from the request, ~0.3 ms of CPU."""
    _spin(0.0003)
    return [float((b + i) % 7) for i, b in enumerate((text * 256)[:256])]


class Server:
    def __init__(self, max_batch: int, max_wait_s: float) -> None:
        self.max_batch, self.max_wait_s = max_batch, max_wait_s
        self.model = Model()
        self.queue: "asyncio.Queue[Tuple[List[float], asyncio.Future, asyncio.Future]]" = asyncio.Queue()
        self.stopped = asyncio.Event()

    async def batch_worker(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            deadline = loop.time() + self.max_wait_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), max(0.0, deadline - loop.time())))
                except asyncio.TimeoutError:
                    break
            with steptrace.step(batch=len(batch)):
                for _, started, _ in batch:
                    started.set_result(None)
                with steptrace.phase("inference"):
                    scores = await asyncio.to_thread(self.model, [features for features, _, _ in batch])
            for (_, _, done), score in zip(batch, scores):
                done.set_result(score)

    async def infer(self, body: bytes) -> str:
        loop = asyncio.get_running_loop()
        with steptrace.step():  # this task's request: phases follow it across awaits
            a = time.perf_counter()
            with steptrace.phase("preprocess"):
                features = tokenize(body)
            b = time.perf_counter()
            started, done = loop.create_future(), loop.create_future()
            with steptrace.phase("queue"):
                await self.queue.put((features, started, done))
                await started
            c = time.perf_counter()
            with steptrace.phase("inference"):
                score = await done
            d = time.perf_counter()
            us = lambda s: int(s * 1e6)  # noqa: E731
            return f"ok {us(c - b)} {us(b - a)} {us(d - c)} {score:.3f}\n"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode(errors="replace") if head.count(b" ") >= 2 else ""
            if path == "/infer":
                body = await self.infer(head)
            elif path == "/metrics":
                body = steptrace.metrics().prometheus("server")
            elif path == "/quit":
                body = "bye\n"
                self.stopped.set()
            else:
                body = "unknown path\n"
            data = body.encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(data), data)
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client left
        finally:
            writer.close()


async def main(port: int, max_batch: int, max_wait_s: float) -> None:
    server = Server(max_batch, max_wait_s)
    worker = asyncio.ensure_future(server.batch_worker())
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=256)
    print(f"listening on 127.0.0.1:{listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        await server.stopped.wait()
    worker.cancel()


if __name__ == "__main__":
    steptrace.configure(print_at_exit=False)  # printed below, on /quit
    if torch is not None:
        torch.set_num_threads(1)
    args = sys.argv[1:]
    asyncio.run(
        main(
            int(args[0]) if args else 8080,
            int(args[1]) if len(args) > 1 else 8,
            float(args[2]) / 1e3 if len(args) > 2 else 0.002,
        )
    )
    s = steptrace.summary()
    print(s, file=sys.stderr)
    print(s.to_json())
