"""EC2's wire format: instance rows into our types, a launch into ``RunInstances`` parameters, spot price
history into prices. Pure functions; the adapter makes the calls."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scalectl.providers.aws.catalog import INSTANCE_TYPES, on_demand_price
from scalectl.providers.aws.options import AwsOptions
from scalectl.providers.base import Capacity, InstanceStatus, LaunchSpec, ProviderInstance
from scalectl.providers.errors import InvalidRequest
from scalectl.providers.status import map_status
from scalectl.providers.tagging import KEY_TAG, TIER_TAG
from scalectl.serving.bootstrap.cloud_init import CloudConfig

USER_DATA_LIMIT = 16 * 1024  # EC2 rejects user data above 16 KB (before base64)

_STATUS: dict[str, InstanceStatus] = {
    "pending": InstanceStatus.PENDING,
    "running": InstanceStatus.RUNNING,
    "shutting-down": InstanceStatus.STOPPING,
    "stopping": InstanceStatus.STOPPING,
    "stopped": InstanceStatus.STOPPED,  # not serving, still holding its EBS volumes: StartInstances resumes it
    "terminated": InstanceStatus.TERMINATED,
}
# StateReason.Code values that say *why* an instance went away.
_PREEMPTED_REASONS = frozenset({"Server.SpotInstanceTermination", "Server.SpotInstanceShutdown"})
_FAILED_REASONS = frozenset(
    {
        "Server.InsufficientInstanceCapacity",
        "Server.InternalError",
        "Client.InternalError",
        "Client.VolumeLimitExceeded",
        "Client.InvalidSnapshot.NotFound",
    }
)


def run_instances_params(spec: LaunchSpec, itype: str, options: AwsOptions, *, provider: str) -> dict[str, Any]:
    """``RunInstances`` parameters for one launch: cloud-init user data, our tags, spot market options."""
    o = options
    user_data = CloudConfig.of(spec.server).user_data() if spec.server is not None else None
    if user_data is not None and len(user_data.encode()) > USER_DATA_LIMIT:
        raise InvalidRequest(
            f"user data is {len(user_data.encode())} bytes; EC2 accepts at most {USER_DATA_LIMIT}",
            provider=provider,
        )
    tags = {k: v for k, v in spec.tags.items() if not k.lower().startswith("aws:")}
    tags.update({"Name": spec.key, KEY_TAG: spec.key, TIER_TAG: spec.tier})
    tag_list = [{"Key": k, "Value": str(v)} for k, v in tags.items()]
    params: dict[str, Any] = {
        "ImageId": o.ami_id or f"resolve:ssm:{o.ami_ssm_parameter}",
        "InstanceType": itype,
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": spec.key,  # EC2's own idempotency: a retried launch returns the same instance
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tag_list},
            {"ResourceType": "volume", "Tags": tag_list},
        ],
        "BlockDeviceMappings": [
            {
                "DeviceName": o.root_device_name,
                "Ebs": {"VolumeSize": o.root_volume_gb, "VolumeType": "gp3", "DeleteOnTermination": True},
            }
        ],
        # IMDSv2 only; hop limit 2 so a container on the box (the spot agent, vLLM) can reach it.
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
        "InstanceInitiatedShutdownBehavior": "terminate",
    }
    if user_data:
        params["UserData"] = user_data  # boto3 base64-encodes it
    if o.subnet_id:
        params["SubnetId"] = o.subnet_id
    elif o.availability_zone:
        params["Placement"] = {"AvailabilityZone": o.availability_zone}
    if o.security_group_ids:
        params["SecurityGroupIds"] = list(o.security_group_ids)
    if o.key_name:
        params["KeyName"] = o.key_name
    if o.iam_instance_profile:
        field = "Arn" if o.iam_instance_profile.startswith("arn:") else "Name"
        params["IamInstanceProfile"] = {field: o.iam_instance_profile}
    if spec.capacity is Capacity.SPOT:
        spot_options: dict[str, Any] = {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}
        if spec.bid_per_hour is not None:
            spot_options["MaxPrice"] = f"{spec.bid_per_hour:.4f}"
        params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot_options}
    return params


def instance_view(raw: Mapping[str, Any], options: AwsOptions, *, provider: str) -> ProviderInstance:
    """Our view of one ``DescribeInstances`` row."""
    tags = {t.get("Key"): t.get("Value") for t in raw.get("Tags") or []}
    state = (raw.get("State") or {}).get("Name")
    reason = (raw.get("StateReason") or {}).get("Code") or ""
    status = instance_status(state, reason)
    itype = INSTANCE_TYPES.get(str(raw.get("InstanceType")))
    capacity = Capacity.SPOT if raw.get("InstanceLifecycle") == "spot" else Capacity.ON_DEMAND
    price = None
    if capacity is Capacity.ON_DEMAND and raw.get("InstanceType"):
        price = on_demand_price(str(raw["InstanceType"]), options.on_demand_prices)
    ip = raw.get("PrivateIpAddress") if options.use_private_ip else raw.get("PublicIpAddress")
    launched = raw.get("LaunchTime")
    return ProviderInstance(
        provider=provider,
        provider_id=str(raw["InstanceId"]),
        key=tags.get(KEY_TAG),
        status=status,
        raw_status=f"{state}:{reason}" if reason else str(state or ""),
        gpu=itype.gpu if itype else None,
        gpu_count=itype.gpu_count if itype else None,
        region=options.region,
        capacity=capacity,
        price_per_hour=price,
        address=f"{ip}:{options.server_port}" if ip and status is InstanceStatus.RUNNING else None,
        created_at=launched.timestamp() if isinstance(launched, datetime) else None,
    )


def instance_status(state: str | None, reason: str) -> InstanceStatus:
    """EC2 state + StateReason.Code -> our status. A spot reclaim is PREEMPTED, a failed launch FAILED."""
    status = map_status(state, _STATUS)
    if status in (InstanceStatus.TERMINATED, InstanceStatus.STOPPING, InstanceStatus.STOPPED) and (
        reason in _PREEMPTED_REASONS
    ):
        return InstanceStatus.PREEMPTED
    if status is InstanceStatus.TERMINATED and reason in _FAILED_REASONS:
        return InstanceStatus.FAILED
    return status


def latest_spot_prices(entries: Any, *, zone: str | None = None) -> dict[str, float]:
    """From spot price history entries: the latest price per (type, zone), then per type the given zone's
    price or the cheapest zone's."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for entry in entries:
        try:
            itype, az = str(entry["InstanceType"]), str(entry["AvailabilityZone"])
            when, price = entry["Timestamp"], float(entry["SpotPrice"])
        except (KeyError, TypeError, ValueError):
            continue  # a malformed entry says nothing about the price
        if price <= 0 or (zone and az != zone):
            continue
        seen = latest.get((itype, az))
        if seen is None or when > seen[0]:
            latest[(itype, az)] = (when, price)
    best: dict[str, float] = {}
    for (itype, _az), (_when, price) in latest.items():
        best[itype] = min(price, best.get(itype, price))
    return best
