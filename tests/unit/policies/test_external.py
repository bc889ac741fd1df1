"""External policies: loading by import path with clear errors, and running them like built-ins."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from scalectl.policies.external import ExternalPolicyError, load_external_policy, run_external
from scalectl.policies.types import Bounds, PolicyInput, PolicyState, Signals
from tests.unit.policies.helpers import T0, Runner, spec

EXAMPLE = "examples.policies.target_tracking:RequestRateTargetTracking"
BOUNDS = Bounds(min=0, max=10)


@pytest.fixture()
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path where a test writes its own policy modules."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names_before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - names_before:
        if name.startswith("userpol_"):
            del sys.modules[name]


def write(directory: Path, name: str, body: str) -> str:
    (directory / f"{name}.py").write_text(textwrap.dedent(body))
    return name


def inp(current: int = 2, **signals: float | None) -> PolicyInput:
    return PolicyInput(T0, Signals(**signals), current, PolicyState())


def test_example_policy_runs_through_the_engine_like_a_built_in() -> None:
    policy = load_external_policy(EXAMPLE, {"target_rps": 40}, BOUNDS)
    run = Runner(spec(kind="external", **{"class": EXAMPLE}), bounds=BOUNDS, current=1, external=policy)
    up = run.tick(0, request_rate=130)
    assert up.desired == 4
    assert up.reason == "130 req/s > 40 × 1 → 4"
    assert run.tick(10, request_rate=None).desired == 4
    assert run.tick(20, request_rate=100).desired == 4  # 100 ≥ 0.8 × 40 × 3: in the band
    assert run.tick(30, request_rate=20).desired == 1
    capped = run.tick(40, request_rate=10_000)
    assert capped.desired == 10
    assert "capped at tier max 10" in capped.reason


def test_options_reach_the_constructor_and_are_validated_there() -> None:
    with pytest.raises(ExternalPolicyError, match="target_rps must be > 0"):
        load_external_policy(EXAMPLE, {"target_rps": 0}, BOUNDS)


@pytest.mark.parametrize(
    ("class_path", "message"),
    [
        ("userpol_missing:Thing", "module 'userpol_missing' not found"),
        ("examples.policies.target_tracking:Nope", "has no class 'Nope'"),
        ("examples.policies.target_tracking:math", "is a module, not a class"),
        ("not a path", 'expected "package.module:ClassName"'),
    ],
)
def test_load_errors_say_what_is_wrong(class_path: str, message: str) -> None:
    with pytest.raises(ExternalPolicyError, match=message):
        load_external_policy(class_path, {}, BOUNDS)


def test_module_importing_a_missing_dependency_names_the_dependency(user_module: Path) -> None:
    name = write(user_module, "userpol_dep", "import userpol_not_installed_anywhere\n")
    with pytest.raises(ExternalPolicyError, match="needs module 'userpol_not_installed_anywhere'"):
        load_external_policy(f"{name}:P", {}, BOUNDS)


def test_module_raising_at_import_is_reported(user_module: Path) -> None:
    name = write(user_module, "userpol_boom", "raise RuntimeError('bad config at import')\n")
    with pytest.raises(ExternalPolicyError, match="RuntimeError: bad config at import"):
        load_external_policy(f"{name}:P", {}, BOUNDS)


def test_wrong_constructor_or_decide_signature_or_missing_decide(user_module: Path) -> None:
    name = write(
        user_module,
        "userpol_sigs",
        """
        class NoArgs:
            def __init__(self):
                pass
            def decide(self, now, signals, current):
                return current, "x"

        class BadDecide:
            def __init__(self, options, bounds):
                pass
            def decide(self, signals):
                return 1, "x"

        class NoDecide:
            def __init__(self, options, bounds):
                pass

        class Raises:
            def __init__(self, options, bounds):
                raise KeyError("region")
            def decide(self, now, signals, current):
                return current, "x"
        """,
    )
    with pytest.raises(ExternalPolicyError, match=r"__init__ must take \(self, options, bounds\)"):
        load_external_policy(f"{name}:NoArgs", {}, BOUNDS)
    with pytest.raises(ExternalPolicyError, match=r"decide must take \(self, now, signals, current\)"):
        load_external_policy(f"{name}:BadDecide", {}, BOUNDS)
    with pytest.raises(ExternalPolicyError, match="has no method decide"):
        load_external_policy(f"{name}:NoDecide", {}, BOUNDS)
    with pytest.raises(ExternalPolicyError, match="raised KeyError: 'region'"):
        load_external_policy(f"{name}:Raises", {}, BOUNDS)


class Answers:
    """A policy that returns whatever the test hands it (or raises it)."""

    def __init__(self, answer: object):
        self.answer = answer

    def decide(self, now: float, signals: Signals, current: int) -> object:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Answer:
    def __init__(self, desired: object, reason: str):
        self.desired, self.reason = desired, reason


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (ZeroDivisionError("division by zero"), "external policy raised ZeroDivisionError: division by zero"),
        ((2.5, "half"), "desired=2.5 (float); expected an int"),
        ((-1, "negative"), "desired=-1; expected 0 or more"),
        ((True, "bool"), "desired=True (bool); expected an int"),
        (("3", "text"), "desired='3' (str); expected an int"),
        (None, "returned None; expected (desired: int, reason: str)"),
        ((1, 2, 3), "returned (1, 2, 3)"),
    ],
)
def test_bad_answers_or_exceptions_hold_current_and_name_the_error(answer: object, expected: str) -> None:
    decision = run_external(Answers(answer), inp(current=3))
    assert decision.desired == 3
    assert expected in decision.reason
    assert decision.reason.endswith("→ hold 3")


def test_an_object_with_desired_and_reason_is_accepted() -> None:
    decision = run_external(Answers(Answer(5, "custom rule")), inp(current=3))
    assert (decision.desired, decision.reason) == (5, "custom rule → 5")


def test_huge_error_messages_are_shortened() -> None:
    decision = run_external(Answers(ValueError("x" * 5000)), inp())
    assert len(decision.reason) < 300
