"""EC2 behind the adapter in tests: moto's in-process EC2, plus fault injection through botocore events.

Faults are answered at botocore's ``before-call`` hook with an EC2-shaped error: an XML body parsed by
botocore's own EC2 parser, so the adapter receives exactly the ``ClientError`` a real EC2 error would
produce (codes moto never returns: capacity, throttling, quotas). Everything else reaches moto.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

import boto3
from botocore import parsers
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends

REGION = "us-east-1"
BASE_AMI = "ami-12c6146b"  # one of the images moto ships

_ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
    "<Message>{message}</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>"
)


class _HttpStub:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}


class FakeEc2:
    """Counts the API calls an EC2 client makes and fails the next ones on demand."""

    def __init__(self, region: str = REGION) -> None:
        self.region = region
        self.calls: Counter[str] = Counter()  # operation name -> calls that reached "EC2"
        self._faults: deque[tuple[str, str, int, str]] = deque()  # (operation or "*", code, status, message)
        self._timeouts: Counter[str] = Counter()
        self.requests: list[tuple[str, dict[str, Any]]] = []  # (operation, parameters as the adapter passed them)

    # ---- wiring ----------------------------------------------------------------------------------
    def attach(self, client: Any) -> None:
        client.meta.events.register_first("before-parameter-build.ec2", self._record)
        client.meta.events.register_first("before-call.ec2", self._before_call)

    def params_of(self, operation: str) -> list[dict[str, Any]]:
        return [p for op, p in self.requests if op == operation]

    @property
    def backend(self) -> Any:
        return ec2_backends[DEFAULT_ACCOUNT_ID][self.region]

    # ---- fault injection -------------------------------------------------------------------------
    def fail_next(
        self, code: str, *, status: int = 400, operation: str = "*", times: int = 1, message: str = ""
    ) -> None:
        """The next ``times`` calls of ``operation`` (EC2 API name like "RunInstances", or "*") fail."""
        for _ in range(times):
            self._faults.append((operation, code, status, message or f"injected {code}"))

    def time_out_next(self, operation: str = "*", times: int = 1) -> None:
        self._timeouts[operation] += times

    def clear_faults(self) -> None:
        self._faults.clear()
        self._timeouts.clear()

    def total_calls(self) -> int:
        return sum(self.calls.values())

    # ---- backend controls ------------------------------------------------------------------------
    def instance(self, instance_id: str) -> Any:
        return self.backend.get_instance(instance_id)

    def set_state(self, instance_id: str, name: str, *, reason_code: str = "", code: int = 0) -> None:
        from moto.ec2.models.instances import StateReason

        inst = self.instance(instance_id)
        inst._state.name = name
        inst._state.code = code
        inst.state_reason = StateReason(message=f"{reason_code}: injected" if reason_code else "", code=reason_code)

    def run_foreign(self, name: str = "someone-elses-box") -> str:
        """An instance somebody else started in the same account: no scalectl tags."""
        client = boto3.client("ec2", region_name=self.region)
        reply = client.run_instances(
            ImageId=BASE_AMI,
            InstanceType="g6e.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name}]}],
        )
        return str(reply["Instances"][0]["InstanceId"])

    # ---- the hooks --------------------------------------------------------------------------------
    def _record(self, params: dict[str, Any], model: Any, **kwargs: Any) -> None:
        self.requests.append((model.name, dict(params)))

    def _before_call(self, model: Any, params: Any, **kwargs: Any) -> tuple[_HttpStub, dict[str, Any]] | None:
        operation = model.name
        self.calls[operation] += 1
        for key in (operation, "*"):
            if self._timeouts[key] > 0:
                self._timeouts[key] -= 1
                from botocore.exceptions import ReadTimeoutError

                raise ReadTimeoutError(endpoint_url=f"https://ec2.{self.region}.amazonaws.com/")
        for i, (op, code, status, message) in enumerate(self._faults):
            if op in (operation, "*"):
                del self._faults[i]
                return self._error(model, code, status, message)
        return None

    @staticmethod
    def _error(model: Any, code: str, status: int, message: str) -> tuple[_HttpStub, dict[str, Any]]:
        body = _ERROR_XML.format(code=code, message=message, request_id="00000000-0000-0000-0000-000000000000")
        parser = parsers.create_parser("ec2")
        parsed = parser.parse(
            {"status_code": status, "headers": {}, "body": body.encode()},
            model.output_shape,
        )
        parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = status
        return _HttpStub(status), parsed


FAKE_ACCESS_KEY_ID = "AKIAFAKEFAKEFAKEFAKE"
FAKE_SECRET_ACCESS_KEY = "fake-secret-never-printed-7d1c0c0a9e"


def set_fake_credentials(monkeypatch: Any) -> None:
    """Credentials for moto, and nothing from the host's ~/.aws leaking into a test."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
