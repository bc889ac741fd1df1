"""``scalectl plan`` and ``scalectl vllm-args``: capacity math and tuned vLLM flags, no daemon needed."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import typer

from scalectl.cli.files import tier_names
from scalectl.cli.output import EXIT_USAGE, Format, OutputOption, emit, fail
from scalectl.sizing.errors import SizingError
from scalectl.sizing.gpus import UnknownGpu, normalize_gpu
from scalectl.sizing.plan import make_plan
from scalectl.sizing.vllm_args import tune_vllm_args
from scalectl.tiers.config import ConfigError, TierSpec, load_config


def plan(
    model: str = typer.Option(..., "--model", "-m", help="Hugging Face id or catalogue name."),
    gpu: str = typer.Option(..., "--gpu", "-g", help="GPU name, e.g. H100, A100-80GB-PCIe, L40S."),
    weights: str | None = typer.Option(None, "--weights", help="fp8, fp16, bf16 or native (default: best for GPU)."),
    kv_cache: str | None = typer.Option(
        None, "--kv-cache", help="fp8 or auto (model dtype); default: fp8 if supported."
    ),
    max_model_len: int = typer.Option(4096, "--max-model-len", help="Context per sequence, tokens."),
    gpu_memory_utilization: float = typer.Option(0.90, "--gpu-memory-utilization"),
    sessions: int | None = typer.Option(None, "--sessions", "-s", help="Concurrent sessions to serve."),
    gpu_count: int | None = typer.Option(None, "--gpu-count", help="GPUs per server (default: fewest that fit)."),
    sessions_per_gpu: int | None = typer.Option(
        None, "--sessions-per-gpu", help="Measured capacity per GPU when below the KV slots."
    ),
    config_json: Path | None = typer.Option(None, "--config-json", help="Hugging Face config.json of the model."),
    overhead_gib: float = typer.Option(1.5, "--runtime-overhead-gib", help="vLLM activations + CUDA graphs, GiB."),
    weights_gib: float | None = typer.Option(None, "--weights-gib", help="Override the weights size, GiB."),
    output: Format = OutputOption,
) -> None:
    """KV bytes per token, slots per GPU, GPUs for S sessions and $/hour."""
    if weights not in (None, "fp8", "fp16", "bf16", "native"):
        fail(f"--weights: expected fp8, fp16, bf16 or native, got {weights!r}", EXIT_USAGE)
    if kv_cache not in (None, "fp8", "auto"):
        fail(f"--kv-cache: expected fp8 or auto, got {kv_cache!r}", EXIT_USAGE)
    try:
        result = make_plan(
            model,
            gpu,
            weights=weights,  # type: ignore[arg-type]
            kv=kv_cache,  # type: ignore[arg-type]
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            sessions=sessions,
            gpu_count=gpu_count,
            sessions_per_gpu=sessions_per_gpu,
            config_json=config_json,
            runtime_overhead_gib=overhead_gib,
            weights_gib=weights_gib,
        )
    except (SizingError, UnknownGpu) as exc:
        fail(str(exc), EXIT_USAGE)
    data: dict[str, Any] = result.to_dict()
    if output is Format.table:
        reasons = data.pop("reasons")
        emit(data, output, title=f"{data['model']} on {data['gpu']}")
        for reason in reasons:
            typer.echo(f"- {reason}")
        return
    emit(data, output)


def vllm_args(
    file: Path = typer.Option(..., "--file", "-f", help="tiers.yaml"),
    tier: str = typer.Option(..., "--tier", "-t", help="Tier name.", autocompletion=tier_names),
    variant: str | None = typer.Option(
        None, "--variant", help="One of the tier's `variants:` by its GPU (e.g. L40S): its servers' command line."
    ),
    output: Format = OutputOption,
) -> None:
    """The tuned `vllm serve` command line for a tier (-o json adds the reason for each flag)."""
    try:
        config, _ = load_config(file)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    spec = config.tiers.get(tier)
    if spec is None:
        fail(f"{file}: no tier {tier!r}; tiers: {', '.join(config.tiers)}", EXIT_USAGE)
    if variant is not None:
        spec = _variant_of(file, tier, spec, variant)
    try:
        tuned = tune_vllm_args(spec.serving, spec.gpu, spec.gpu_count, drain_timeout=spec.drain_timeout)
    except (SizingError, UnknownGpu) as exc:
        fail(f'{file}: tier "{tier}": {exc}', EXIT_USAGE)
    if output is Format.table:
        typer.echo(shlex.join(tuned.command()))
        for line in tuned.notes:  # warnings on stderr: stdout stays a command line to paste
            if line.startswith(("warning:", "note:")):
                typer.echo(line, err=True)
        return
    emit(tuned.to_dict(), output)


def _variant_of(file: Path, name: str, spec: TierSpec, wanted: str) -> TierSpec:
    """The tier as served on the variant named by its GPU (any spelling the catalogue reads)."""
    try:
        gpu = normalize_gpu(wanted)
    except UnknownGpu as exc:
        fail(f"--variant: {exc}", EXIT_USAGE)
    found = [v for v in spec.variants if v.gpu == gpu]
    if not found:
        listed = ", ".join(v.label for v in spec.variants) or "none"
        fail(f'{file}: tier "{name}": no variant on {gpu}; its variants: {listed}', EXIT_USAGE)
    return spec.on(found[0].gpu, found[0].gpu_count)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
    app.command("vllm-args")(vllm_args)
