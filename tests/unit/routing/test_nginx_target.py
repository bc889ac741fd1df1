"""Rendering and the write/validate/rollback/reload cycle, with stand-in commands instead of nginx."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scalectl.serving.routing import Endpoint, NginxTarget, RoutingError, RoutingTarget, TierRoute
from scalectl.serving.routing.nginx_conf import render_tier

EPS = [Endpoint("10.0.0.2:8000"), Endpoint("10.0.0.1:8000")]


def test_stateless_tier_uses_least_conn() -> None:
    text = render_tier(TierRoute("batch", listen="127.0.0.1:8081"), EPS)
    assert "least_conn;" in text and "hash" not in text
    assert text.index("10.0.0.1:8000") < text.index("10.0.0.2:8000")  # sorted: stable output
    assert "max_fails=3 fail_timeout=10s" in text
    assert "proxy_pass http://scalectl_batch;" in text and "proxy_buffering off" in text


def test_affinity_tier_hashes_the_session_header() -> None:
    text = render_tier(TierRoute("chat-ui", session_affinity=True), EPS)
    assert "hash $scalectl_chat_ui_session consistent;" in text
    assert "map $http_x_session_id $scalectl_chat_ui_session" in text and '"" $request_id;' in text
    assert "server {" not in text  # no listen: upstream only


def test_empty_tier_keeps_a_valid_upstream_and_answers_503() -> None:
    text = render_tier(TierRoute("chat", listen="8080"), [])
    assert "server 127.0.0.1:9 down;" in text
    assert "return 503" in text and "proxy_pass" not in text


def test_empty_tier_with_an_activator_sends_requests_to_it_under_the_tier_prefix() -> None:
    route = TierRoute("chat", listen="8080", activator=("127.0.0.1:8089",), activator_wait_s=300)
    text = render_tier(route, [])
    assert "server 127.0.0.1:8089 max_fails=0;" in text and "down" not in text
    assert "proxy_pass http://scalectl_chat/activate/chat/;" in text
    assert "proxy_read_timeout 900s;" in text  # the hold plus a long generation
    assert "return 503" not in text
    assert "proxy_next_upstream" not in text  # one replica: nothing to try next


def test_several_activators_let_nginx_try_the_next_when_a_standby_answers_503() -> None:
    route = TierRoute("chat", listen="8080", activator=("10.0.0.1:8089", "10.0.0.2:8089"))
    text = render_tier(route, [])
    assert "proxy_next_upstream error timeout http_503 non_idempotent;" in text
    assert text.count("max_fails=0") == 2


def test_ready_instances_take_the_activator_out_of_the_path() -> None:
    route = TierRoute("chat", listen="8080", activator=("127.0.0.1:8089",))
    text = render_tier(route, EPS)
    assert "8089" not in text and "/activate/" not in text
    assert "proxy_pass http://scalectl_chat;" in text


def test_an_upstream_only_tier_cannot_be_activated_and_keeps_its_placeholder() -> None:
    text = render_tier(TierRoute("chat", activator=("127.0.0.1:8089",)), [])
    assert "server 127.0.0.1:9 down;" in text and "8089" not in text


def test_bad_endpoints_and_names_are_rejected() -> None:
    for bad in ("10.0.0.1", "10.0.0.1:8000; evil", "host:0", "a b:80"):
        with pytest.raises(ValueError):
            Endpoint(bad)
        with pytest.raises(ValueError):
            TierRoute("chat", activator=(bad,))
    with pytest.raises(ValueError):
        TierRoute("Bad_Name")


def _target(tmp_path: Path, test_ok: bool = True) -> tuple[NginxTarget, Path]:
    log = tmp_path / "calls.log"
    # Tiny commands that log their call; "test" fails on demand.
    tester = [sys.executable, "-c", f"open({str(log)!r},'a').write('test\\n'); raise SystemExit({0 if test_ok else 1})"]
    reloader = [sys.executable, "-c", f"open({str(log)!r},'a').write('reload\\n')"]
    return NginxTarget(tmp_path / "conf.d", test_command=tester, reload_command=reloader), log


async def test_apply_writes_validates_and_reloads(tmp_path: Path) -> None:
    target, log = _target(tmp_path)
    assert isinstance(target, RoutingTarget)
    result = await target.apply(TierRoute("chat"), EPS)
    assert (result.changed, result.reloaded, result.endpoints) == (True, True, 2)
    assert "10.0.0.1:8000" in target.path_for("chat").read_text()
    assert log.read_text().split() == ["test", "reload"]
    assert not [p for p in (tmp_path / "conf.d").iterdir() if p.name.startswith(".")]  # no temp files left


async def test_unchanged_config_is_not_reloaded(tmp_path: Path) -> None:
    target, log = _target(tmp_path)
    await target.apply(TierRoute("chat"), EPS)
    again = await target.apply(TierRoute("chat"), list(reversed(EPS)))
    assert (again.changed, again.reloaded) == (False, False)
    assert log.read_text().split() == ["test", "reload"]


async def test_rejected_config_rolls_back(tmp_path: Path) -> None:
    good, _ = _target(tmp_path)
    await good.apply(TierRoute("chat"), EPS)
    before = good.path_for("chat").read_text()
    bad, log = _target(tmp_path, test_ok=False)
    log.unlink()
    with pytest.raises(RoutingError, match="kept the previous one"):
        await bad.apply(TierRoute("chat"), [Endpoint("10.0.0.9:8000")])
    assert bad.path_for("chat").read_text() == before
    assert log.read_text().split() == ["test"]  # never reloaded
    with pytest.raises(RoutingError):
        await bad.apply(TierRoute("new-tier"), EPS)
    assert not bad.path_for("new-tier").exists()  # a first file that fails is removed


async def test_missing_nginx_binary_is_a_routing_error(tmp_path: Path) -> None:
    target = NginxTarget(tmp_path, nginx_bin=str(tmp_path / "no-nginx"))
    with pytest.raises(RoutingError, match="cannot run"):
        await target.apply(TierRoute("chat"), EPS)
    assert not target.path_for("chat").exists()


async def test_remove_tier(tmp_path: Path) -> None:
    target, _ = _target(tmp_path)
    await target.apply(TierRoute("chat"), EPS)
    assert await target.remove("chat") is True
    assert not target.path_for("chat").exists()
    assert await target.remove("chat") is False
