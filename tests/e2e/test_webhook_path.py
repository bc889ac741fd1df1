"""Interruption webhooks end to end: an agent's signed notice, posted to the running daemon's HTTP port,
drains and replaces a local-provider instance; unsigned or wrongly signed notices change nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.helpers import json_of, scalectl
from tests.e2e.local_fleet import alive, local_fleet

pytestmark = pytest.mark.e2e
SECRET = "e2e-agent-secret-0123456789abcdef"


def _signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    """docs/webhooks.md: HMAC-SHA256 over "<timestamp>.<raw body>", hex, with a sha256= prefix."""
    ts = str(int(time.time()))
    digest = hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Scalectl-Timestamp": ts, "X-Scalectl-Signature": f"sha256={digest}"}


def test_a_signed_agent_notice_drains_and_replaces_the_instance(tmp_path: Path) -> None:
    with local_fleet(tmp_path, 1, SCALECTL_WEBHOOK_SECRET=SECRET) as fleet:
        fleet.wait("one ready instance", lambda: fleet.counts() == (1, 0, 0))
        (first,) = fleet.instances()
        url = f"{fleet.url}/v1/webhooks/interruption"
        body = json.dumps(
            {"provider": "local", "key": first["key"], "instance_id": first["provider_id"], "action": "terminate"}
        ).encode()

        # Not authentic: refused, and nothing happens to the instance.
        assert (
            httpx.post(url, content=body, headers=_signed(body, "not-the-secret-0123456789"), timeout=10).status_code
            == 401
        )
        assert (
            httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=10).status_code == 401
        )
        assert [i["key"] for i in fleet.instances()] == [first["key"]]

        answer = httpx.post(url, content=body, headers=_signed(body), timeout=10)
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"accepted": True, "action": "terminate", "instance": first["key"], "acted": True}

        # The noticed server goes; a replacement comes up and serves.
        fleet.wait("the noticed server to stop", lambda: not alive(int(first["pid"])))
        fleet.wait(
            "a replacement",
            lambda: fleet.counts() == (1, 0, 0) and [i["key"] for i in fleet.instances()] not in ([], [first["key"]]),
        )
        (second,) = fleet.instances()
        assert httpx.get(f"http://127.0.0.1:{second['port']}/health", timeout=5).status_code == 200

        fleet.steer(0)
        fleet.wait("no instances", lambda: fleet.counts() == (0, 0, 0))
        assert fleet.stop() == 0, fleet.log_tail()
        assert fleet.leftovers() == [], "stand-in processes still running"

    events = json_of(scalectl(fleet.data_dir, "events", "--limit", "1000", "-o", "json"))
    about_first = [e for e in events if first["key"] in e.get("what", "")]
    kinds = [e["kind"] for e in about_first]
    assert "interruption-notice" in kinds, kinds
    assert kinds.index("interruption-notice") < kinds.index("retired")
    drained = next(e for e in about_first if e["kind"] == "draining")
    assert "interruption notice" in drained["what"]
    assert any(e["kind"] == "ready" and second["key"] in e.get("what", "") for e in events)
