"""User policies (``kind: external``): load a class by import path and run it like a built-in.

The interface (see docs/policies.md)::

    class MyPolicy:
        def __init__(self, options: dict[str, Any], bounds: Bounds) -> None: ...
        def decide(self, now: float, signals: Signals, current: int) -> tuple[int, str]: ...

The class is constructed once per tier. ``decide`` may also return any object with ``desired`` and
``reason`` attributes. The tier's min/max/budget are still applied afterwards. Whatever goes wrong
inside ``decide`` (an exception, a non-integer or negative answer) holds the current count, and the
reason names the error.
"""

from __future__ import annotations

import importlib
import inspect
import numbers
import re
from collections.abc import Mapping
from typing import Any, Protocol

from scalectl.policies.types import Bounds, Decision, PolicyInput, Signals

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_MAX_ERROR_TEXT = 200


class ExternalPolicyLike(Protocol):
    def decide(self, now: float, signals: Signals, current: int) -> Any: ...


class ExternalPolicyError(ValueError):
    """The external policy class cannot be loaded; the message says why and how to fix it."""


def load_external_policy(
    class_path: str, options: Mapping[str, Any] | None = None, bounds: Bounds | None = None
) -> ExternalPolicyLike:
    """Import ``package.module:ClassName`` and construct it with ``(options, bounds)``."""
    if not _CLASS_PATH.match(class_path):
        raise ExternalPolicyError(f'policy.class: expected "package.module:ClassName", got {class_path!r}')
    module_name, class_name = class_path.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ExternalPolicyError(
                f"policy.class: module {module_name!r} not found; install it or add its directory to PYTHONPATH"
            ) from None
        raise ExternalPolicyError(
            f"policy.class: importing {module_name!r} failed: it needs module {exc.name!r}, which is not installed"
        ) from None
    except Exception as exc:
        raise ExternalPolicyError(f"policy.class: importing {module_name!r} raised {_describe(exc)}") from None
    cls: Any = getattr(module, class_name, None)
    if cls is None:
        raise ExternalPolicyError(f"policy.class: module {module_name!r} has no class {class_name!r}")
    if not inspect.isclass(cls):
        raise ExternalPolicyError(f"policy.class: {class_path} is a {type(cls).__name__}, not a class")
    if not callable(getattr(cls, "decide", None)):
        raise ExternalPolicyError(f"policy.class: {class_path} has no method decide(now, signals, current)")
    _check_signature(cls, (dict(options or {}), bounds), f"{class_path}.__init__", "(self, options, bounds)")
    factory: Any = cls  # a user class: typed only by the protocol it must follow
    try:
        policy = factory(dict(options or {}), bounds)
    except Exception as exc:
        raise ExternalPolicyError(f"policy: {class_path}(options, bounds) raised {_describe(exc)}") from None
    _check_signature(policy.decide, (0.0, Signals(), 0), f"{class_path}.decide", "(self, now, signals, current)")
    return policy  # type: ignore[no-any-return]


def _check_signature(func: Any, args: tuple[Any, ...], name: str, expected: str) -> None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return  # builtins without introspection: trust them
    try:
        signature.bind(*args)
    except TypeError:
        raise ExternalPolicyError(f"policy.class: {name} must take {expected}; it takes {signature}") from None


def run_external(policy: ExternalPolicyLike, inp: PolicyInput) -> Decision:
    """Run a user policy for one tick; any failure holds the current count with the error as the reason."""
    current = inp.current
    try:
        answer = policy.decide(inp.now, inp.signals, current)
    except Exception as exc:
        return Decision(current, f"external policy raised {_describe(exc)} → hold {current}", inp.state)
    try:
        desired, reason = _unpack(answer)
    except ValueError as exc:
        return Decision(current, f"external policy {exc} → hold {current}", inp.state)
    return Decision(desired, f"{reason} → {desired}" if reason else f"external policy → {desired}", inp.state)


def _unpack(answer: Any) -> tuple[int, str]:
    if isinstance(answer, tuple) and len(answer) == 2:
        desired, reason = answer
    elif hasattr(answer, "desired") and hasattr(answer, "reason"):
        desired, reason = answer.desired, answer.reason
    else:
        raise ValueError(f"returned {_short(repr(answer))}; expected (desired: int, reason: str)")
    if isinstance(desired, bool) or not isinstance(desired, numbers.Integral):
        raise ValueError(f"returned desired={_short(repr(desired))} ({type(desired).__name__}); expected an int")
    if desired < 0:
        raise ValueError(f"returned desired={desired}; expected 0 or more")
    return int(desired), _short(str(reason))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_short(str(exc))}"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 1] + "…"
