"""The stand-in's HTTP surface, shaped like vLLM's OpenAI-compatible server.

``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (streaming SSE or not) and ``GET /metrics``.
``POST /_standin/health`` with ``{"healthy": false}`` makes ``/health`` answer 503 (a dead engine), for tests.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import uuid
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from scalectl.sizing.engine import EngineConfig, EngineProfile, build_profile
from scalectl.sizing.errors import UnknownModel
from scalectl.sizing.gpus import gpu_info
from scalectl.sizing.models import lookup_model
from scalectl.sizing.plan import choose_dtypes
from scalectl.vllm_standin.catalogue import Generation
from scalectl.vllm_standin.engine import Engine, Request, count_tokens
from scalectl.vllm_standin.metrics import MetricsRenderer, MetricsState

_WORDS = ("the", " model", " answers", " with", " a", " plan", ",", " then", " checks", " it", ".", " Next")


@dataclass(frozen=True, slots=True)
class StandinConfig:
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    max_model_len: int = 4096
    max_num_seqs: int = 256
    speed: float = 1.0
    metrics_generation: Generation = "new"
    gpu: str = "H100-SXM5-80GB"  # whose figures the engine model uses
    latency_model: str = "meta-llama/Llama-3.1-8B-Instruct"  # the figures for a model the catalogue lacks
    process_metrics: bool = True


def engine_profile(c: StandinConfig) -> EngineProfile:
    """The engine model for the served model on ``c.gpu``, with the dtypes ``scalectl plan`` picks for it."""
    try:
        model = lookup_model(c.model)
    except UnknownModel:
        model = lookup_model(c.latency_model)
    gpu = gpu_info(c.gpu)
    weights, kv, _ = choose_dtypes(model, gpu, None, None)
    config = EngineConfig(
        max_num_seqs=c.max_num_seqs, max_model_len=c.max_model_len, weights_dtype=weights, kv_cache_dtype=kv
    )
    return build_profile(gpu, model, config)


class Standin:
    """One stand-in server: its engine, metric state and Starlette app."""

    def __init__(self, config: StandinConfig | None = None):
        self.config = config or StandinConfig()
        c = self.config
        self.state = MetricsState(c.metrics_generation, c.model, c.max_model_len, created_at=time.time())
        self.renderer = MetricsRenderer(self.state, process_metrics=c.process_metrics)
        self.engine = Engine(self.state, engine_profile(c), speed=c.speed)
        self._gzip_cache: tuple[bytes, bytes] | None = None
        self.app = Starlette(
            routes=[
                Route("/health", self._health, methods=["GET"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/metrics", self._metrics, methods=["GET"]),
                Route("/_standin/health", self._set_health, methods=["POST"]),
            ],
            lifespan=self._lifespan,
        )

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.engine.start()
        try:
            yield
        finally:
            await self.engine.stop()

    # -- controls for tests ------------------------------------------------------------------------
    def set_healthy(self, healthy: bool) -> None:
        self.engine.healthy = healthy

    def restart_counters(self) -> None:
        """Zero counters and histograms, as if the vLLM process had restarted."""
        self.state.reset(time.time())

    # -- handlers ----------------------------------------------------------------------------------
    async def _health(self, request: HttpRequest) -> Response:
        return Response(status_code=200 if self.engine.healthy else 503)

    async def _set_health(self, request: HttpRequest) -> Response:
        body = await request.json()
        self.set_healthy(bool(body.get("healthy", True)))
        return JSONResponse({"healthy": self.engine.healthy})

    async def _models(self, request: HttpRequest) -> Response:
        c = self.config
        created = int(self.state.created_at)
        card = {
            "id": c.model,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": c.model,
            "parent": None,
            "max_model_len": c.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid5(uuid.NAMESPACE_URL, c.model).hex}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def _metrics(self, request: HttpRequest) -> Response:
        body = self.renderer.render()
        headers = {"Content-Type": CONTENT_TYPE_PLAIN_0_0_4}
        if "gzip" in request.headers.get("accept-encoding", ""):
            if self._gzip_cache is None or self._gzip_cache[0] is not body:
                self._gzip_cache = (body, gzip.compress(body, compresslevel=6))
            headers["Content-Encoding"] = "gzip"
            return Response(self._gzip_cache[1], headers=headers)
        return Response(body, headers=headers)

    async def _chat(self, request: HttpRequest) -> Response:
        if not self.engine.healthy:
            return _error(503, "The engine is not healthy.", "ServiceUnavailableError")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError, zlib.error):
            return _error(400, "The request body is not valid JSON.", "BadRequestError")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "`messages` must be a non-empty list.", "BadRequestError")
        c = self.config
        if body.get("model", c.model) != c.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        prompt = _prompt_text(body["messages"])
        prompt_tokens = count_tokens(prompt) + 4 * len(body["messages"])  # chat template overhead
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        if max_tokens is None:
            max_tokens = c.max_model_len - prompt_tokens
        if not isinstance(max_tokens, int) or max_tokens < 1 or prompt_tokens + max_tokens > c.max_model_len:
            return _error(
                400,
                f"This model's maximum context length is {c.max_model_len} tokens. However, you requested "
                f"{prompt_tokens + (max_tokens if isinstance(max_tokens, int) else 0)} tokens ({prompt_tokens} in "
                f"the messages, {max_tokens} in the completion). Please reduce the length of the messages or "
                "completion.",
                "BadRequestError",
            )
        target = max_tokens if body.get("ignore_eos") else 16 + zlib.crc32(prompt.encode()) % 240
        target = max(target, int(body.get("min_tokens") or 0))
        req = self.engine.submit(prompt, prompt_tokens, max_tokens, target)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(req, completion_id, created, include_usage), media_type="text/event-stream"
            )
        try:
            n = await _drain(req)
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        message = {"role": "assistant", "content": "".join(_word(i) for i in range(n)), "tool_calls": []}
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": c.model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": req.finish_reason}],
                "usage": _usage(req),
            }
        )

    async def _stream(self, req: Request, completion_id: str, created: int, include_usage: bool) -> AsyncIterator[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.config.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n"

        try:
            yield chunk({"role": "assistant", "content": ""})
            while (index := await req.tokens.get()) is not None:
                yield chunk({"content": _word(index - 1)})
            yield chunk({"content": ""}, req.finish_reason)
            if include_usage:
                usage = {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.config.model,
                    "choices": [],
                    "usage": _usage(req),
                }
                yield f"data: {json.dumps(usage)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            if req.finish_reason is None:  # the client went away mid-stream
                self.engine.abort(req)


async def _drain(req: Request) -> int:
    n = 0
    while (index := await req.tokens.get()) is not None:
        n = index
    return n


def _usage(req: Request) -> dict[str, int]:
    return {
        "prompt_tokens": req.prompt_tokens,
        "total_tokens": req.prompt_tokens + req.generated,
        "completion_tokens": req.generated,
    }


def _word(i: int) -> str:
    return _WORDS[i % len(_WORDS)]


def _prompt_text(messages: list[Any]) -> str:
    parts: list[str] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role', 'user')}: {content or ''}\n")
    return "".join(parts)


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {"object": "error", "message": message, "type": kind, "param": None, "code": status}, status_code=status
    )
