"""Options of a ``type: aws`` provider block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scalectl.providers.errors import InvalidRequest

# The AWS Deep Learning Base AMI (NVIDIA driver, CUDA, EFA; Ubuntu 22.04), resolved by EC2 at launch.
DEFAULT_AMI_SSM_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"


class AwsOptions(BaseModel):
    """``options:`` of an ``type: aws`` provider block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    profile: str | None = None  # a named profile from ~/.aws; default: the standard credential chain
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    key_name: str | None = None
    ami_id: str | None = None  # wins over ami_ssm_parameter
    ami_ssm_parameter: str = DEFAULT_AMI_SSM_PARAMETER
    iam_instance_profile: str | None = None  # a name, or an ARN
    root_volume_gb: int = Field(200, ge=8, le=16384)
    root_device_name: str = "/dev/sda1"  # the Ubuntu AMIs' root device
    availability_zone: str | None = None  # spot prices of this zone; launches there when no subnet is set
    on_demand_prices: dict[str, float] = Field(default_factory=dict)  # instance type -> $/hour overrides
    server_port: int = Field(8000, ge=1, le=65535)
    use_private_ip: bool = False
    max_attempts: int = Field(3, ge=1, le=10)  # tenacity attempts for retryable errors
    retry_wait_max: float = Field(20.0, gt=0)
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(30.0, gt=0)
    # EC2 is eventually consistent: an instance just launched can be "not found" for a little while.
    consistency_grace: float = Field(120.0, ge=0)

    @classmethod
    def parse(cls, name: str, options: Mapping[str, Any]) -> AwsOptions:
        try:
            return cls.model_validate(dict(options))
        except ValidationError as exc:
            problems = "; ".join(
                f"options.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise InvalidRequest(f"provider {name!r} (aws): {problems}", provider=name) from None


def require_boto3(name: str) -> None:
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise InvalidRequest(
            "the aws provider needs boto3, which is an optional extra: pip install 'scalectl[aws]'", provider=name
        ) from None
