"""What the activator adds to a request's latency, beyond the wait for an instance (target: < 5 ms).

    python bench/bench_activator.py [--requests 400] [--held 50]

An upstream that streams an SSE chat completion (8 chunks) runs in a second process on loopback; the
activator runs in this process behind uvicorn, as the daemon serves it. Three measurements, each the
median and p99 over ``--requests`` streamed requests (whole response read):

- direct: client → upstream;
- pass-through: client → activator → upstream with the tier's instance already known (what a request
  meets in the moment between "ready" and nginx's reload);
- held: ``--held`` requests arrive at a tier at zero and wait; the instance is announced once all are
  held; each one's time from that announcement to its last byte, against the direct time.

When the tier is warm, nginx routes to the instances and the activator is not in the path: it adds 0
(tests/e2e/test_activator_path.py checks the route).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

UPSTREAM = """
import asyncio, sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

async def chat(request):
    await request.body()
    async def events():
        for i in range(8):
            yield f'data: {{"choices": [{{"delta": {{"content": "t{i}"}}}}]}}\\n\\n'.encode()
        yield b"data: [DONE]\\n\\n"
    return StreamingResponse(events(), media_type="text/event-stream")

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_listening(port: int) -> None:
    for _ in range(300):  # bounded: 30 s
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


async def one(client: object, url: str) -> float:
    import httpx

    assert isinstance(client, httpx.AsyncClient)
    started = time.perf_counter()
    async with client.stream("POST", url, content=BODY, headers={"content-type": "application/json"}) as r:
        async for _ in r.aiter_raw():
            pass
        assert r.status_code == 200, r.status_code
    return time.perf_counter() - started


def summary(label: str, seconds: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in seconds)
    p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"  {label:<40} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   (n={len(ms)})")
    return p50, p99


async def main(requests: int, held: int) -> None:
    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Route

    from scalectl.serving.activator import Activator, HoldLimits

    up_port, act_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(up_port)])
    activator = Activator()
    activator.configure("warm", HoldLimits())
    activator.set_endpoints("warm", [f"127.0.0.1:{up_port}"])
    app = Starlette(routes=[Route("/activate/{tier}/{path:path}", activator.handle, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=act_port, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    try:
        await wait_listening(up_port)
        await wait_listening(act_port)
        direct_url = f"http://127.0.0.1:{up_port}/v1/chat/completions"
        via_url = f"http://127.0.0.1:{act_port}/activate/warm/v1/chat/completions"
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(20):  # warm up both paths
                await one(client, direct_url)
                await one(client, via_url)
            direct, via = [], []
            for _ in range(requests):  # interleaved, so machine noise hits both alike
                direct.append(await one(client, direct_url))
                via.append(await one(client, via_url))

            rounds, released = max(1, requests // held), []
            for r in range(rounds):
                tier = f"cold{r}"
                activator.configure(tier, HoldLimits(max_held=held, max_wait_s=60))
                cold_url = f"http://127.0.0.1:{act_port}/activate/{tier}/v1/chat/completions"
                tasks = [asyncio.create_task(one(client, cold_url)) for _ in range(held)]
                for _ in range(1000):  # bounded: until every request is held
                    if activator.held(tier) == held:
                        break
                    await asyncio.sleep(0.005)
                announced = time.perf_counter()
                activator.set_endpoints(tier, [f"127.0.0.1:{up_port}"])
                await asyncio.gather(*tasks)
                finished = time.perf_counter() - announced
                # The batch of held requests is served concurrently: compare its tail with the same batch
                # sent straight to the upstream at once.
                started = time.perf_counter()
                await asyncio.gather(*(one(client, direct_url) for _ in range(held)))
                released.append((finished, time.perf_counter() - started))
                activator.remove(tier)

        print(f"activator overhead on loopback ({requests} streamed requests per path, {held} held per round)")
        d50, d99 = summary("direct to the instance", direct)
        v50, v99 = summary("through the activator (instance known)", via)
        print(f"  added by the activator: p50 {v50 - d50:+.2f} ms, p99 {v99 - d99:+.2f} ms per request")
        batch = statistics.median(f for f, _ in released) * 1000
        straight = statistics.median(s for _, s in released) * 1000
        print(
            f"  held: {held} requests released at once finish {batch:.1f} ms after the instance is announced; "
            f"the same {held} sent straight to it take {straight:.1f} ms: +{(batch - straight) / held:.2f} ms "
            f"per request ({len(released)} rounds, medians)"
        )
    finally:
        server.should_exit = True
        await serving
        await activator.aclose()
        upstream.terminate()
        upstream.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--held", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.held))
