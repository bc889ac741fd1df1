"""EC2 error codes -> the provider error taxonomy.

botocore raises ``ClientError`` carrying EC2's documented error code (``Error.Code``) and the HTTP
status; connection problems and missing credentials are botocore exceptions of their own. Messages
are passed through a scrubber so an access key id can never reach a log line.
"""

from __future__ import annotations

import re
from typing import Any

from scalectl.providers.errors import (
    AuthFailed,
    InstanceNotFound,
    InsufficientCapacity,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    Transient,
)

_BY_CODE: dict[str, type[ProviderError]] = {
    # No machines of this type (for this price) right now: try another offer.
    "InsufficientInstanceCapacity": InsufficientCapacity,
    "InsufficientHostCapacity": InsufficientCapacity,
    "InsufficientCapacity": InsufficientCapacity,
    "SpotMaxPriceTooLow": InsufficientCapacity,
    # Account limits: a person has to raise them.
    "MaxSpotInstanceCountExceeded": QuotaExceeded,
    "InstanceLimitExceeded": QuotaExceeded,
    "VcpuLimitExceeded": QuotaExceeded,
    "InsufficientFreeAddressesInSubnet": QuotaExceeded,
    # Throttling (EC2 answers RequestLimitExceeded with HTTP 503).
    "RequestLimitExceeded": RateLimited,
    "Throttling": RateLimited,
    "ThrottlingException": RateLimited,
    "RequestThrottled": RateLimited,
    # Credentials and permissions.
    "AuthFailure": AuthFailed,
    "UnauthorizedOperation": AuthFailed,
    "InvalidClientTokenId": AuthFailed,
    "SignatureDoesNotMatch": AuthFailed,
    "ExpiredToken": AuthFailed,
    "RequestExpired": AuthFailed,
    "OptInRequired": AuthFailed,
    "PendingVerification": AuthFailed,
    "Blocked": AuthFailed,
    # The service itself.
    "InternalError": Transient,
    "InternalFailure": Transient,
    "Unavailable": Transient,
    "ServiceUnavailable": Transient,
    # Unknown instance ids.
    "InvalidInstanceID.NotFound": InstanceNotFound,
    "InvalidInstanceID.Malformed": InstanceNotFound,
}

# AKIA... (long-term) and ASIA... (temporary) access key ids.
_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


def scrub(text: str) -> str:
    return _ACCESS_KEY_ID.sub("<access-key-id>", text)


def error_code(exc: BaseException) -> str | None:
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def map_client_error(exc: BaseException, *, provider: str, operation: str) -> ProviderError:
    """Translate a botocore exception raised by ``operation`` into the taxonomy (never raises)."""
    from botocore import exceptions as bx  # boto3 is an optional extra: import only when used

    if isinstance(exc, bx.ClientError):
        code = error_code(exc) or "Unknown"
        message = scrub(str(exc.response.get("Error", {}).get("Message") or ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        cls = _BY_CODE.get(code)
        if cls is None:
            cls = Transient if status >= 500 else InvalidRequest
        return cls(f"{operation}: {code}: {message}".rstrip(": "), provider=provider)
    kind = type(exc).__name__
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return AuthFailed(
            f"{operation}: no usable AWS credentials ({kind}); set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "options.profile, or run with an instance role",
            provider=provider,
        )
    if isinstance(exc, bx.ProfileNotFound):
        return AuthFailed(f"{operation}: {scrub(str(exc))}; fix options.profile", provider=provider)
    if isinstance(exc, bx.NoRegionError):
        return InvalidRequest(f"{operation}: no AWS region; set options.region", provider=provider)
    if isinstance(exc, bx.ParamValidationError):
        return InvalidRequest(f"{operation}: {scrub(str(exc))}", provider=provider)
    # Connection failures, timeouts and anything else botocore raises on the way: worth another try.
    return Transient(f"{operation}: cannot reach EC2 ({kind})", provider=provider)
