"""One Optuna study shared by several `scalectl tune` workers (processes or machines): Optuna's RDB storage
holds it (``postgresql://…``; ``sqlite:///…`` for processes on one machine), a worker creates it or joins
it (``load_if_exists``), and each reads the whole study back at the end, so the best it reports is every
worker's. A study remembers its tier and SLO target: a worker searching something else is refused."""

from __future__ import annotations

import os
from typing import Any

from scalectl.simulator.tune import TrialResult, TuneInputError, TuneResult


def optuna_url(storage: str) -> str:
    """The SQLAlchemy URL for ``storage``: a plain ``postgresql://`` URL names psycopg 3 (the driver the
    store uses and the one installed), not SQLAlchemy's default psycopg2."""
    for plain in ("postgresql://", "postgres://"):
        if storage.startswith(plain):
            return "postgresql+psycopg://" + storage.removeprefix(plain)
    return storage


def _masked(text: str, storage: str) -> str:
    """``text`` without the storage URL's password (secrets never reach an error message)."""
    from sqlalchemy.engine import make_url

    try:
        password = make_url(optuna_url(storage)).password
    except Exception:  # an unparsable URL: Optuna's own error says what is wrong with it
        return text
    return text.replace(str(password), "***") if password else text


OPEN_ATTEMPTS = 3


# PostgreSQL's codes for "another worker made it first": a duplicate key, table (a ProgrammingError, not an
# IntegrityError, in SQLAlchemy) or object such as an enum type.
RACE_SQLSTATES = frozenset({"23505", "42P07", "42710"})


def _a_race(exc: Exception) -> bool:
    """Another worker created the same tables, type or study first."""
    from sqlalchemy.exc import DBAPIError, IntegrityError

    if isinstance(exc, IntegrityError) or type(exc).__name__ == "DuplicatedStudyError":
        return True
    return isinstance(exc, DBAPIError) and getattr(exc.orig, "sqlstate", None) in RACE_SQLSTATES


def shared_study(storage: str, name: str, tier: str, slo_target: float, seed: int) -> Any:
    """Create the study ``name`` in ``storage``, or join it. Raises TuneInputError when the storage cannot
    be opened or the study searches another tier or SLO target."""
    import optuna

    # Workers sharing one seed would propose the very same settings: each adds its process id.
    sampler = optuna.samplers.TPESampler(seed=seed + os.getpid())
    study = None
    for attempt in range(OPEN_ATTEMPTS):
        try:
            study = optuna.create_study(
                direction="minimize", sampler=sampler, storage=optuna_url(storage), study_name=name, load_if_exists=True
            )
            break
        except Exception as exc:  # any driver's error: said in one line, never with the password
            # Workers started together on an empty database race to create Optuna's tables and the study
            # (PostgreSQL: a duplicate type or key); the loser finds them made on its next attempt.
            if attempt + 1 < OPEN_ATTEMPTS and _a_race(exc):
                continue
            message = _masked(" ".join(str(exc).split())[:300], storage)
            raise TuneInputError(
                f'--storage: cannot open the study "{name}": {type(exc).__name__}: {message}'
            ) from None
    assert study is not None  # every path without one raised
    attrs = study.user_attrs
    if "tier" not in attrs:
        # "tier" is what another worker checks, so it is written last: a worker reading between the two
        # writes would otherwise find the tier without its --slo and refuse a study that matches it
        study.set_user_attr("slo_target", slo_target)
        study.set_user_attr("tier", tier)
    elif (attrs["tier"], attrs.get("slo_target")) != (tier, slo_target):
        raise TuneInputError(
            f'--study "{name}" searches tier "{attrs["tier"]}" at --slo {attrs.get("slo_target")}, not tier "{tier}" '
            f"at --slo {slo_target}: give the same tier and --slo, or name another study with --study"
        )
    return study


def whole_study(result: TuneResult, study: Any) -> TuneResult:
    """``result`` with every finished trial of the study (this worker's and the others'), by number.
    Trials still running elsewhere (or whose worker died) have no result yet and are left out."""
    import optuna

    state = optuna.trial.TrialState
    trials: list[TrialResult] = []
    for t in study.get_trials(deepcopy=False):
        params, attrs = dict(t.params), t.user_attrs
        if t.state is state.COMPLETE:
            trials.append(TrialResult(t.number, params, t.value, attrs.get("slo")))
            result.requests = result.requests or attrs.get("requests")
        elif t.state is state.PRUNED:
            stopped = attrs.get("stopped") or "stopped early"
            trials.append(
                TrialResult(
                    t.number, params, attrs.get("cost"), None, stopped=stopped, stopped_at=attrs.get("stopped_at")
                )
            )
        elif t.state is state.FAIL:
            trials.append(TrialResult(t.number, params, None, None, attrs.get("error") or "failed"))
    result.trials = trials
    return result
