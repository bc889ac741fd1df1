"""Where a tier's signals come from (the ``signals:`` block of a tier)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scalectl.policies.durations import Duration
from scalectl.sources.redact import masked_password


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _not_masked(url: str | None) -> str | None:
    """`scalectl get tiers` prints passwords as ***: applying that output back must not store the mask."""
    if url is not None and masked_password(url):
        raise ValueError(
            "the password is masked (***), as `scalectl get tiers` prints it; put the real password back, or "
            "better, move the URL to an environment variable and name it with the matching `*_env` field"
        )
    return url


class TransportOptions(_Strict):
    """The Celery app's ``broker_transport_options`` that decide Redis key names (kombu's names and defaults)."""

    global_keyprefix: str = ""
    priority_steps: list[int] = Field(default_factory=lambda: [0, 3, 6, 9])
    sep: str = "\x06\x16"
    unacked_key: str = "unacked"


class QueueSource(_Strict):
    """Celery queue depth and in-flight tasks, read from the broker."""

    kind: Literal["celery"] = "celery"
    broker_url: str | None = None  # redis://… or amqp://…; None: $SCALECTL_BROKER_URL
    broker_url_env: str | None = None  # name of an env var holding the URL (keeps passwords out of YAML)
    queues: list[str] = Field(default_factory=lambda: ["celery"])
    transport_options: TransportOptions = Field(default_factory=TransportOptions)
    # RabbitMQ management API (http://host:15672), for ready *and* unacknowledged counts; without it only
    # ready messages are known over AMQP and in-flight is unknown. Credentials default to the broker URL's.
    management_url: str | None = None
    management_url_env: str | None = None

    _urls_not_masked = field_validator("broker_url", "management_url")(_not_masked)


class MetricsSource(_Strict):
    """Latency and KV metrics: scrape each instance's vLLM /metrics, or ask a Prometheus server."""

    kind: Literal["vllm", "prometheus"] = "vllm"
    prometheus_url: str | None = None
    window: Duration = 60.0
    selector: str = ""  # PromQL label matchers for kind: prometheus, e.g. 'job="vllm",tier="orchestrator"'
    path: str = "/metrics"  # kind: vllm, the path scraped on each endpoint

    _url_not_masked = field_validator("prometheus_url")(_not_masked)


class SignalsSpec(_Strict):
    queue: QueueSource | None = None
    metrics: MetricsSource | None = None
    endpoints: list[str] = Field(default_factory=list)  # vLLM servers we did not create, scraped too
    stale_after: Duration = 60.0  # a reading older than this is unknown


NO_SOURCE = (
    "no source configured: add a `signals:` block (queue, metrics or endpoints) to the tier; see docs/signals.md"
)


def has_source(spec: SignalsSpec) -> bool:
    """Whether the tier names anything to read (the daemon also scrapes the instances it launches)."""
    return spec.queue is not None or spec.metrics is not None or bool(spec.endpoints)
