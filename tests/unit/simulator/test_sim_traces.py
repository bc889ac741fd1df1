from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scalectl.simulator.workloads.traces import (
    Trace,
    TraceError,
    read_azure_csv,
    read_mooncake_jsonl,
    read_trace,
    replay,
)


def test_real_azure_conversation_trace(traces_dir: Path) -> None:
    trace = read_trace(traces_dir / "azure-llm-2023-conv.csv")
    assert len(trace) == 19_366
    assert 55 * 60 < trace.span_s < 60 * 60
    assert trace.t[0] == 0.0 and np.all(np.diff(trace.t) >= 0)
    assert np.median(trace.n_in) == 1020 and np.median(trace.n_out) == 129
    assert trace.n_cached.sum() == 0


def test_real_azure_code_trace_keeps_sub_microsecond_timestamps(traces_dir: Path) -> None:
    trace = read_trace(traces_dir / "azure-llm-2023-code.csv")
    assert len(trace) == 8_819
    # Rows 2 and 3: 18:17:03.9799600 -> 18:17:04.0319600
    assert trace.t[1] == pytest.approx(0.052, abs=1e-6)


def test_real_mooncake_trace_with_prefix_reuse(traces_dir: Path) -> None:
    trace = read_trace(traces_dir / "mooncake-conversation.jsonl")
    assert len(trace) == 12_031
    assert 55 * 60 < trace.span_s <= 60 * 60
    assert trace.n_cached.max() > 0  # shared hash_ids prefixes
    assert np.all(trace.n_cached < trace.n_in)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_fixture_parses_seven_fractional_digits(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "t.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n\n",
    )
    trace = read_azure_csv(p)
    assert trace.t.tolist() == pytest.approx([0.0, 4.314579], abs=1e-6)
    assert trace.n_in.tolist() == [374, 396] and trace.n_out.tolist() == [44, 109]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\nnot-a-time,1,2\n",
            "line 3: TIMESTAMP",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,37x,44\n", "line 2: ContextTokens"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374\n", "line 2: expected 3"),
        ("time,in,out\n2023-11-16 18:15:46.68,374,44\n", "line 1: expected the header"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,-4,44\n", "line 2: ContextTokens"),
    ],
)
def test_malformed_azure_lines_name_the_line(tmp_path: Path, text: str, needle: str) -> None:
    p = _write(tmp_path, "bad.csv", text)
    with pytest.raises(TraceError, match=needle) as err:
        read_azure_csv(p)
    assert str(p) in str(err.value)


def test_mooncake_fixture_counts_cached_prefix_blocks(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "m.jsonl",
        '{"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]}\n'
        '{"timestamp": 500, "input_length": 1200, "output_length": 5, "hash_ids": [1, 2, 9]}\n'
        '{"timestamp": 900, "input_length": 300, "output_length": 5, "hash_ids": [7]}\n',
    )
    trace = read_mooncake_jsonl(p)
    assert trace.t.tolist() == [0.0, 0.5, 0.9]
    assert trace.n_cached.tolist() == [0, 1024, 0]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"timestamp": 0, "input_length": 10}', "line 2: missing field 'output_length'"),
        ("{not json", "line 2: not valid JSON"),
        ('{"timestamp": -5, "input_length": 10, "output_length": 1}', "line 2: timestamp"),
        ("[1, 2]", "line 2: expected a JSON object"),
    ],
)
def test_malformed_mooncake_lines_name_the_line(tmp_path: Path, line: str, needle: str) -> None:
    good = '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": []}\n'
    p = _write(tmp_path, "bad.jsonl", good + line + "\n")
    with pytest.raises(TraceError, match=needle):
        read_mooncake_jsonl(p)


def test_missing_trace_and_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not found"):
        read_trace(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="format"):
        read_trace(_write(tmp_path, "x.txt", "a"))


def _synthetic(tmp_path: Path, n: int = 1000) -> Path:
    rows = "\n".join(f'{{"timestamp": {i * 100}, "input_length": 100, "output_length": 10}}' for i in range(n))
    return _write(tmp_path, "s.jsonl", rows + "\n")


def test_replay_rate_scale_thins_and_replicates(tmp_path: Path) -> None:
    trace = read_trace(_synthetic(tmp_path))  # 1000 requests, one every 100 ms
    rng = np.random.default_rng(0)
    kw = dict(duration_s=1e9, time_scale=1.0, repeat=1, offset_s=0.0, shape=None)
    half, _ = replay(trace, rate_scale=0.5, rng=rng, **kw)
    triple, rows = replay(trace, rate_scale=3.0, rng=rng, **kw)
    assert 430 < half.shape[0] < 570
    assert triple.shape[0] == 3000
    assert np.bincount(rows).tolist() == [3] * 1000
    assert np.all(np.diff(triple) >= 0)
    assert np.unique(triple).shape[0] == 3000  # replicas are jittered, not stacked on one instant


def test_replay_time_scale_repeat_offset_and_duration(tmp_path: Path) -> None:
    trace = read_trace(_synthetic(tmp_path))  # span 99.9 s, period 100 s
    rng = np.random.default_rng(0)
    t, _rows = replay(
        trace, duration_s=1e9, rate_scale=1.0, time_scale=2.0, repeat=3, offset_s=50.0, shape=None, rng=rng
    )
    assert t.shape[0] == 3000
    assert t[0] == 50.0 and t[1] == pytest.approx(50.2)
    assert t[1000] == pytest.approx(50.0 + 200.0)  # second copy starts one stretched period later
    fill, _ = replay(
        trace, duration_s=1000.0, rate_scale=1.0, time_scale=1.0, repeat=0, offset_s=0.0, shape=None, rng=rng
    )
    assert fill.shape[0] == 10_000 and fill.max() < 1000.0


def test_replay_shape_multiplies_the_rate(tmp_path: Path) -> None:
    trace = read_trace(_synthetic(tmp_path))
    rng = np.random.default_rng(1)
    t, _ = replay(
        trace, duration_s=1e9, rate_scale=1.0, time_scale=1.0, repeat=1, offset_s=0.0,
        shape=lambda x: np.where(x < 50.0, 2.0, 0.0), rng=rng,
    )  # fmt: skip
    assert t.shape[0] == 1000 and t.max() < 50.0 + 0.1


def _stream(rng: np.random.Generator, rate: float, span_s: float, burst: int = 1) -> Trace:
    """A recorded stream: Poisson arrivals at ``rate`` per second, or (``burst`` > 1) Poisson bursts of
    ``burst`` requests a second apart at most, so its counts per 10 s vary ``burst``× more than Poisson."""
    starts = np.sort(rng.uniform(0.0, span_s, rng.poisson(rate * span_s / burst)))
    t = np.sort((starts[:, None] + rng.uniform(0.0, 1.0, (starts.shape[0], burst))).ravel())
    t = t[t < span_s]
    ones = np.ones(t.shape[0])
    return Trace("stream", t - t[0], ones * 100, ones * 10, ones * 0)


def _dispersion(t: np.ndarray, span_s: float, bin_s: float = 10.0) -> tuple[float, float]:
    """Mean count per bin and the index of dispersion (variance / mean) of the counts."""
    counts = np.bincount(np.floor(t / bin_s).astype(np.int64), minlength=int(span_s // bin_s))[: int(span_s // bin_s)]
    return float(counts.mean()), float(counts.var() / counts.mean())


def _replayed(trace: Trace, scale: float, replication: str | None = None, seed: int = 1) -> np.ndarray:
    """``trace`` replayed once at ``scale``; ``replication`` None: the default."""
    how = {} if replication is None else {"replication": replication}
    t, _ = replay(
        trace, duration_s=1e9, rate_scale=scale, time_scale=1.0, repeat=1, offset_s=0.0, shape=None,
        rng=np.random.default_rng(seed), **how,  # type: ignore[arg-type]
    )  # fmt: skip
    return t


def test_replication_superposes_independent_streams() -> None:
    # A Poisson-like trace of 15 req/s replicated x10: the counts per 10 s bin of 10 independent streams vary
    # like one Poisson stream of 150 req/s (index of dispersion ~1), where the clumped form puts each
    # request's copies in the same bin (~10). The mean rate is the trace's x10 exactly.
    trace = _stream(np.random.default_rng(0), 15.0, 3600.0)
    assert _dispersion(trace.t, 3600.0)[1] == pytest.approx(1.0, abs=0.25)
    independent = _replayed(trace, 10.0)  # the default
    assert independent.shape[0] == 10 * len(trace)
    mean, dispersion = _dispersion(independent, 3600.0)
    assert mean == pytest.approx(10 * len(trace) / 360, rel=0.01)
    assert dispersion == pytest.approx(1.0, abs=0.3)


def test_clumped_replication_is_ten_times_burstier() -> None:
    trace = _stream(np.random.default_rng(0), 15.0, 3600.0)
    clumped = _replayed(trace, 10.0, "clumped")
    assert clumped.shape[0] == 10 * len(trace)
    assert _dispersion(clumped, 3600.0)[1] == pytest.approx(10.0, rel=0.3)


def test_replication_keeps_each_streams_own_burstiness() -> None:
    # A bursty trace (dispersion ~5): ten independent copies of it vary like ten such streams (~5), not like
    # one stream x10 (~50) nor like Poisson draws from its rate curve (~1).
    trace = _stream(np.random.default_rng(2), 15.0, 3600.0, burst=5)
    one = _dispersion(trace.t, 3600.0)[1]
    assert 3.5 < one < 7.0
    assert _dispersion(_replayed(trace, 10.0), 3600.0)[1] == pytest.approx(one, rel=0.35)


def test_fractional_replication_thins_the_last_copy() -> None:
    trace = _stream(np.random.default_rng(3), 15.0, 3600.0)
    t = _replayed(trace, 2.5)
    assert t.shape[0] == pytest.approx(2.5 * len(trace), rel=0.02)
    assert np.all(np.diff(t) >= 0) and t.min() >= 0 and t.max() < 3600.0
    assert _dispersion(t, 3600.0)[1] == pytest.approx(1.0, abs=0.3)


def test_first_copy_is_the_trace_as_recorded(tmp_path: Path) -> None:
    trace = read_trace(_synthetic(tmp_path))
    kw = dict(duration_s=1e9, time_scale=1.0, repeat=1, offset_s=0.0, shape=None)
    once, _ = replay(trace, rate_scale=1.0, rng=np.random.default_rng(0), **kw)
    assert np.array_equal(once, trace.t)
