"""The fast /metrics reader against prometheus_client's parser, and what it does with bad input."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalectl.sources.exposition import ExpositionError, parse_vllm_metrics, parse_vllm_metrics_reference
from scalectl.vllm_standin.metrics import MetricsRenderer, MetricsState
from tests.unit.signals.fixtures import ALL, samples, text

LABELS = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'


@pytest.mark.parametrize("name", ALL)
def test_fast_reader_equals_prometheus_client_on_recorded_texts(name: str) -> None:
    body = text(name)
    assert parse_vllm_metrics(body, 5.0) == parse_vllm_metrics_reference(body, 5.0)


@settings(max_examples=40, deadline=None)
@given(
    generation=st.sampled_from(["new", "old"]),
    ttfts=st.lists(st.floats(min_value=0, max_value=3000, allow_nan=False), max_size=60),
    waiting=st.integers(0, 500),
    model=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30),
)
def test_fast_reader_equals_reference_on_generated_texts(
    generation: str, ttfts: list[float], waiting: int, model: str
) -> None:
    state = MetricsState(generation, model, 4096, created_at=1.7e9)  # type: ignore[arg-type]
    for value in ttfts:
        state.histograms["ttft"].observe(value)
        state.successes["stop"] += 1
    state.gauges["waiting"] = float(waiting)
    body = MetricsRenderer(state, process_metrics=True).render().decode()
    fast = parse_vllm_metrics(body, 1.0)
    assert fast == parse_vllm_metrics_reference(body, 1.0)
    assert fast.waiting == waiting
    assert fast.ttft is not None and fast.ttft.count == len(ttfts)


def test_figures_of_a_recorded_text() -> None:
    snap = parse_vllm_metrics(text("new_2"), 5.0)
    assert snap.generation == "new"
    assert snap.ttft is not None and snap.ttft.count == len(samples("new", "1")) + len(samples("new", "2"))
    assert snap.successes == snap.ttft.count
    assert snap.ttft.sum == pytest.approx(sum(samples("new", "1")) + sum(samples("new", "2")), rel=1e-6)
    assert snap.prefix_queries == 600.0 * 1000 and snap.prefix_hits == 420.0 * 1000
    line = next(line for line in text("new_2").splitlines() if line.startswith("vllm:kv_cache_usage_perc{"))
    assert snap.kv_usage == float(line.split()[-1])
    old = parse_vllm_metrics(text("old_2"), 5.0)
    assert old.generation == "old" and old.prefix_hit_rate == 0.7 and old.prefix_queries is None
    assert old.ttft is not None and old.ttft.bounds[-2] == 10.0  # the V0 buckets stop at 10 s


def test_engines_are_summed_and_kv_is_averaged() -> None:
    body = (
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_waiting{engine="1",model_name="m"} 4.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.2\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.6\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 5.0\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 5.0\n'
    )
    for parse in (parse_vllm_metrics, parse_vllm_metrics_reference):
        snap = parse(body, 0.0)
        assert snap.waiting == 7.0
        assert snap.kv_usage == pytest.approx(0.4) and snap.kv_usage_max == 0.6
        assert snap.ttft is not None and snap.ttft.cumulative == (6.0, 7.0)


def test_engines_are_summed_as_prometheus_client_writes_them() -> None:
    """prometheus_client writes a histogram's series one after another, each with its own _count and _sum
    between them: every series is read, not only the first run of lines."""
    body = (
        "# HELP vllm:time_to_first_token_seconds ttft\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 1.0\n'
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1.0\n'
        'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 1.0\n'
        'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.2\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="m"} 2.0\n'
        'vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 3.0\n'
        'vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 3.0\n'
        'vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.5\n'
        "# HELP vllm:num_requests_running running\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        "# a comment between the series\n"
        'vllm:num_requests_running{engine="1",model_name="m"} 4.0\n'
    )
    fast, reference = parse_vllm_metrics(body, 0.0), parse_vllm_metrics_reference(body, 0.0)
    assert fast == reference
    assert fast.ttft is not None and fast.ttft.cumulative == (3.0, 4.0) and fast.ttft.sum == pytest.approx(2.7)
    assert fast.running == 7.0


def test_breakdown_series_are_not_added_to_the_total() -> None:
    body = (
        'vllm:num_requests_waiting{engine="0",model_name="m"} 5.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="m",reason="capacity"} 4.0\n'
    )
    assert parse_vllm_metrics(body, 0.0).waiting == 5.0


def test_a_missing_inf_bucket_makes_ttft_unknown_and_says_why() -> None:
    body = "\n".join(
        line
        for line in text("new_2").splitlines()
        if 'time_to_first_token_seconds_bucket{engine="0",le="+Inf"' not in line
    )
    for parse in (parse_vllm_metrics, parse_vllm_metrics_reference):
        snap = parse(body, 0.0)
        assert snap.ttft is None
        assert any("+Inf" in p for p in snap.problems)
        assert snap.waiting is not None  # the rest is still read


def test_non_cumulative_buckets_are_refused() -> None:
    body = (
        'vllm:time_to_first_token_seconds_bucket{le="0.1"} 5.0\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 3.0\n'
        "vllm:num_requests_running 1\n"
    )
    snap = parse_vllm_metrics(body, 0.0)
    assert snap.ttft is None and "not cumulative" in snap.problems[0]


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_nan_and_inf_values_make_that_figure_unknown(value: str) -> None:
    body = text("new_1").replace(
        f"vllm:num_requests_waiting{{{LABELS}}} ", f"vllm:num_requests_waiting{{{LABELS}}} {value} #"
    )
    body = "\n".join(
        line.split(" #")[0] if line.startswith("vllm:num_requests_waiting{") else line for line in body.splitlines()
    )
    snap = parse_vllm_metrics(body, 0.0)
    assert snap == parse_vllm_metrics_reference(body, 0.0)
    assert snap.waiting is None
    assert any("vllm:num_requests_waiting" in p for p in snap.problems)
    assert snap.running is not None


def test_nan_in_a_bucket_makes_the_histogram_unknown() -> None:
    bucket = (
        'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"}'
    )
    body = text("new_1").replace(f"{bucket} ", f"{bucket} NaN #")
    body = "\n".join(line.split(" #")[0] for line in body.splitlines())
    snap = parse_vllm_metrics(body, 0.0)
    assert snap.ttft is None and snap.waiting is not None


@pytest.mark.parametrize(
    "line",
    [
        'vllm:num_requests_waiting{model_name="m" 3',  # unclosed labels
        'vllm:num_requests_waiting{model_name="m"} three',  # not a number
        "vllm:num_requests_waiting{model_name=m} 3",  # unquoted label value
        'vllm:num_requests_waiting{model_name="m"} 3 4 5',  # too many fields
    ],
)
def test_malformed_lines_in_metrics_we_read_are_errors(line: str) -> None:
    with pytest.raises(ExpositionError):
        parse_vllm_metrics(line + "\n", 0.0)
    if not line.endswith("3 4 5"):  # prometheus_client tolerates trailing fields; the fast reader does not
        with pytest.raises(ExpositionError):
            parse_vllm_metrics_reference(line + "\n", 0.0)


@pytest.mark.parametrize("body", ["", "<html><body>502 Bad Gateway</body></html>", "node_load1 0.5\n"])
def test_text_without_vllm_metrics_is_an_error(body: str) -> None:
    with pytest.raises(ExpositionError, match="no vllm: metrics"):
        parse_vllm_metrics(body, 0.0)


def test_a_longer_name_sharing_a_prefix_is_not_read_as_the_metric() -> None:
    body = 'vllm:num_requests_waiting_by_reason{reason="x"} 9\nvllm:num_requests_waiting 2\n'
    assert parse_vllm_metrics(body, 0.0).waiting == 2.0
    assert parse_vllm_metrics("vllm:num_requests_waiting 2\nvllm:num_requests_waiting_x 9\n", 0.0).waiting == 2.0


def test_escaped_label_values() -> None:
    body = 'vllm:num_requests_running{model_name="a \\"quoted\\" \\\\ name"} 3\n'
    assert parse_vllm_metrics(body, 0.0) == parse_vllm_metrics_reference(body, 0.0)
    assert parse_vllm_metrics(body, 0.0).running == 3.0


def test_shuffled_values_keep_fast_and_reference_equal() -> None:
    rng = random.Random(3)
    lines = text("old_2").splitlines()
    changed = [
        line.rsplit(" ", 1)[0] + f" {rng.random() * 100:.3f}" if line.startswith("vllm:num_requests") else line
        for line in lines
    ]
    body = "\n".join(changed) + "\n"
    assert parse_vllm_metrics(body, 0.0) == parse_vllm_metrics_reference(body, 0.0)
    assert not math.isnan(parse_vllm_metrics(body, 0.0).waiting or 0)
