"""The shipped on-instance agent (serving/agent/scalectl-spot-agent.sh), run as it runs on a machine: with
curl and openssl, against a local server that speaks AWS's IMDSv2 as documented (a PUT for a session token
first; 401 without it; spot/instance-action 404 until EC2 schedules the interruption), posting to a local
receiver that checks the notice with the daemon's own signature check and parser."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from scalectl.controller.webhooks.auth import AuthMethod, WebhookAuth, authenticate
from scalectl.controller.webhooks.notice import InterruptionNotice, NoticeAction, NoticeSource, parse_notice
from scalectl.providers.secrets import Secret
from scalectl.serving.agent import spot_agent_script
from tests.fakes import LoopbackServer

SECRET = "agent-e2e-secret-0123456789abcdef"
INSTANCE_ID = "i-0abc1234def567890"
TOKEN_TTL_HEADER = "x-aws-ec2-metadata-token-ttl-seconds"


class FakeImds:
    """IMDSv2: ``PUT /latest/api/token`` (TTL header 1–21600) gives a token every GET must carry."""

    def __init__(self, notice_after_polls: int) -> None:
        self.notice_after_polls = notice_after_polls
        self.polls = 0
        self.unauthenticated = 0
        self.tokens: set[str] = set()
        self.app = Starlette(
            routes=[
                Route("/latest/api/token", self.token, methods=["PUT"]),
                Route("/latest/meta-data/instance-id", self.instance_id, methods=["GET"]),
                Route("/latest/meta-data/spot/instance-action", self.instance_action, methods=["GET"]),
            ]
        )

    async def token(self, request: Request) -> Response:
        ttl = request.headers.get(TOKEN_TTL_HEADER, "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return PlainTextResponse("", status_code=400)
        token = f"token-{len(self.tokens)}"
        self.tokens.add(token)
        return PlainTextResponse(token)

    def _authorised(self, request: Request) -> bool:
        ok = request.headers.get("x-aws-ec2-metadata-token") in self.tokens
        self.unauthenticated += 0 if ok else 1
        return ok

    async def instance_id(self, request: Request) -> Response:
        if not self._authorised(request):
            return PlainTextResponse("", status_code=401)
        return PlainTextResponse(INSTANCE_ID)

    async def instance_action(self, request: Request) -> Response:
        if not self._authorised(request):
            return PlainTextResponse("", status_code=401)
        self.polls += 1
        if self.polls <= self.notice_after_polls:
            return PlainTextResponse("Not Found", status_code=404)
        return JSONResponse({"action": "terminate", "time": "2026-03-01T12:02:00Z"})


class Receiver:
    """Where the agent posts: every request is checked as the daemon checks it."""

    def __init__(self) -> None:
        self.notices: list[InterruptionNotice] = []
        self.methods: list[AuthMethod] = []
        self.received = threading.Event()
        self.auth = WebhookAuth(hmac_secret=Secret(SECRET))
        self.app = Starlette(routes=[Route("/v1/webhooks/interruption", self.post, methods=["POST"])])

    async def post(self, request: Request) -> Response:
        body = await request.body()
        self.methods.append(authenticate(dict(request.headers), body, self.auth, time.time()))
        self.notices.append(parse_notice(dict(request.headers), body))
        self.received.set()
        return JSONResponse({"accepted": True}, status_code=202)


@pytest.fixture
def agent_file(tmp_path: Path) -> Path:
    for tool in ("curl", "openssl"):
        assert shutil.which(tool), f"{tool} is needed to run the agent as it runs on an instance"
    path = tmp_path / "scalectl-spot-agent.sh"
    path.write_text(spot_agent_script())
    path.chmod(0o755)
    return path


@pytest.fixture
def servers() -> Iterator[tuple[FakeImds, Receiver, str, str]]:
    imds, receiver = FakeImds(notice_after_polls=2), Receiver()
    with LoopbackServer(imds.app) as metadata, LoopbackServer(receiver.app) as daemon:
        yield imds, receiver, f"{metadata.url}/latest", f"{daemon.url}/v1/webhooks/interruption"


def _run(agent: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SCALECTL_POLL_SECONDS": "0.2"}
    return subprocess.run(["sh", str(agent)], env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_the_agent_waits_for_the_notice_and_posts_it_signed(
    agent_file: Path, servers: tuple[FakeImds, Receiver, str, str]
) -> None:
    imds, receiver, metadata, url = servers
    done = _run(
        agent_file,
        {
            "CLOUD": "aws",
            "SCALECTL_IMDS_URL": metadata,
            "SCALECTL_URL": url,
            "SCALECTL_WEBHOOK_SECRET": SECRET,
            "SCALECTL_PROVIDER": "aws-east",
            "SCALECTL_KEY": "sc-batch-0042",
        },
    )
    assert done.returncode == 0, done.stderr
    assert imds.polls == 3 and imds.unauthenticated == 0  # two 404s, then the notice; always with a token
    assert receiver.methods == [AuthMethod.HMAC]
    (notice,) = receiver.notices
    assert (notice.provider, notice.key, notice.provider_instance_id) == ("aws-east", "sc-batch-0042", INSTANCE_ID)
    assert notice.action is NoticeAction.TERMINATE and notice.source is NoticeSource.AGENT
    assert notice.deadline_epoch == pytest.approx(1772366520.0)  # 2026-03-01T12:02:00Z
    assert SECRET not in done.stdout + done.stderr


def test_an_unknown_cloud_is_refused_in_one_line(agent_file: Path) -> None:
    done = _run(agent_file, {"CLOUD": "azure"})
    assert done.returncode == 2 and "CLOUD must be aws or gcp" in done.stderr and "\n" not in done.stderr.strip()
