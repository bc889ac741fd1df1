"""The vLLM stand-in over real loopback HTTP: API shapes, metrics the scraper reads, latency model, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from scalectl.clocks import SystemClock
from scalectl.sizing.engine import EngineConfig, build_profile
from scalectl.sources.exposition import parse_vllm_metrics, parse_vllm_metrics_reference
from scalectl.sources.reader import SignalReader
from scalectl.sources.spec import SignalsSpec
from scalectl.vllm_standin import StandinConfig, run_in_thread
from scalectl.vllm_standin.app import engine_profile
from tests.ports import free_port

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]


def chat(n_words: int = 50, **extra: object) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": "word " * n_words}], **extra}


def test_health_models_and_chat_shapes() -> None:
    with run_in_thread(StandinConfig(model="m", max_model_len=2048, speed=50)) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        assert client.get("/health").status_code == 200
        card = client.get("/v1/models").json()["data"][0]
        assert (card["id"], card["object"], card["max_model_len"]) == ("m", "model", 2048)

        body = client.post("/v1/chat/completions", json=chat(max_tokens=12, ignore_eos=True)).json()
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == 12
        assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 12

        with client.stream(
            "POST",
            "/v1/chat/completions",
            json=chat(max_tokens=5, ignore_eos=True, stream=True, stream_options={"include_usage": True}),
        ) as r:
            events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 5
        assert chunks[-1]["usage"]["completion_tokens"] == 5 and chunks[-1]["choices"] == []

        assert client.post("/v1/chat/completions", json=chat(model="other")).status_code == 404
        too_long = client.post("/v1/chat/completions", json=chat(n_words=3000, max_tokens=10))
        assert too_long.status_code == 400 and "maximum context length is 2048" in too_long.json()["message"]

        server.standin.set_healthy(False)
        assert client.get("/health").status_code == 503


@pytest.mark.parametrize("generation", ["new", "old"])
def test_metrics_count_what_was_served(generation: str) -> None:
    with run_in_thread(StandinConfig(model="m", speed=50, metrics_generation=generation)) as server:  # type: ignore[arg-type]
        client = httpx.Client(base_url=server.url, timeout=30)
        for _ in range(7):
            client.post("/v1/chat/completions", json=chat(max_tokens=8))
        text = client.get("/metrics").text
    snap = parse_vllm_metrics(text, 0.0)
    assert snap == parse_vllm_metrics_reference(text, 0.0)
    assert snap.generation == generation
    assert snap.successes == 7 and snap.ttft is not None and snap.ttft.count == 7
    assert snap.running == 0 and snap.waiting == 0
    if generation == "new":
        assert 'vllm:num_requests_running{engine="0",model_name="m"}' in text and "vllm:prompt_tokens_created" in text
    else:
        assert 'vllm:num_requests_running{model_name="m"}' in text and "_created" not in text


def test_the_standin_runs_the_shared_engine_model_for_its_model_and_gpu() -> None:
    h100 = engine_profile(StandinConfig(model="meta-llama/Llama-3.1-8B-Instruct", max_num_seqs=64))
    assert h100 == build_profile("H100-SXM5-80GB", "llama-3.1-8b", EngineConfig(max_num_seqs=64))
    # A name the catalogue lacks runs with Llama 3.1 8B's figures; an Ampere GPU gets BF16 and a 2-byte KV cache.
    a100 = engine_profile(StandinConfig(model="m", gpu="A100-80GB-PCIe"))
    assert a100.kv_bytes_per_token == 2 * h100.kv_bytes_per_token
    assert a100.step_s(1, 1000, 0) > h100.step_s(1, 1000, 0)


def test_ttft_grows_with_queueing() -> None:
    """With 2 slots and 24 concurrent requests most wait: their TTFT (model time) must exceed a lone one's."""
    with run_in_thread(StandinConfig(model="m", speed=20, max_num_seqs=2)) as server:

        async def load() -> list[float]:
            async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
                await client.post("/v1/chat/completions", json=chat(max_tokens=20, ignore_eos=True))
                alone = parse_vllm_metrics((await client.get("/metrics")).text, 0).ttft
                await asyncio.gather(
                    *(client.post("/v1/chat/completions", json=chat(max_tokens=20, ignore_eos=True)) for _ in range(24))
                )
                after = parse_vllm_metrics((await client.get("/metrics")).text, 0).ttft
            assert alone is not None and after is not None
            return [alone.sum or 0.0, ((after.sum or 0.0) - (alone.sum or 0.0)) / 24]

        lone_ttft, mean_loaded_ttft = asyncio.run(load())
    assert mean_loaded_ttft > 3 * lone_ttft


async def test_reader_over_standins_of_both_generations_with_a_restart() -> None:
    configs = [StandinConfig(model="m", speed=50), StandinConfig(model="m", speed=50, metrics_generation="old")]
    with run_in_thread(configs) as servers:
        dead = f"http://127.0.0.1:{free_port()}"  # nobody listens there (this worker's own port)
        spec = SignalsSpec.model_validate({"metrics": {"window": "5m"}, "endpoints": [servers.urls[1], dead]})
        reader = SignalReader(SystemClock(), timeout=2.0)
        try:
            await reader.read("orch", spec, [servers.urls[0]])
            async with httpx.AsyncClient(timeout=60) as client:
                await asyncio.gather(
                    *(
                        client.post(u + "/v1/chat/completions", json=chat(max_tokens=10))
                        for u in servers.urls
                        for _ in range(10)
                    )
                )
            servers.standins[0].restart_counters()  # the first server restarts: its counters start again from 0
            async with httpx.AsyncClient(timeout=60) as client:
                await asyncio.gather(
                    *(client.post(servers.urls[0] + "/v1/chat/completions", json=chat(max_tokens=10)) for _ in range(5))
                )
            reading = await reader.read("orch", spec, [servers.urls[0]])
        finally:
            await reader.aclose()
    s = reading.signals
    assert s.ttft_p50_s is not None and s.ttft_p95_s is not None and s.ttft_p99_s is not None
    assert 0 < s.ttft_p50_s <= s.ttft_p95_s <= s.ttft_p99_s
    assert s.requests_running == 0 and s.requests_waiting == 0
    assert list(reading.errors) == [f"vllm {dead}"]
    details = reader.details("orch")
    assert details["endpoints_answering"] == 2
    assert details["preemptions"] == 0


def test_process_cli_drains_in_flight_requests_on_sigterm() -> None:
    port = free_port()
    command = [sys.executable, "-m", "scalectl.vllm_standin", "--host", "127.0.0.1", "--port", str(port),
               "--model", "m", "--max-model-len", "4096", "--max-num-seqs", "8", "--speed", "1",
               "--metrics-generation", "old"]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("the stand-in process did not come up")
        assert "vllm:gpu_cache_usage_perc" in httpx.get(url + "/metrics").text

        received: list[str] = []
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST", url + "/v1/chat/completions", json=chat(max_tokens=150, ignore_eos=True, stream=True)
            ) as response,
        ):
            lines = response.iter_lines()
            received.append(next(lines))  # the request is in flight now
            process.send_signal(signal.SIGTERM)
            received.extend(lines)
        events = [line for line in received if line]
        assert events[-1] == "data: [DONE]"
        tokens = [json.loads(e[6:]) for e in events[:-1]]
        assert sum(1 for t in tokens if t["choices"] and t["choices"][0]["delta"].get("content")) == 150
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
