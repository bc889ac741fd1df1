"""AWS EC2 adapter: GPU instances through boto3 (the optional ``aws`` extra), one region per account entry.

boto3 is synchronous, so every call runs in a worker thread (``asyncio.to_thread``) and the daemon's
event loop never blocks. botocore's own retries are off: tenacity is the one, bounded, retry layer and
it sleeps on the injected clock. ``create`` passes our idempotency key as EC2's ``ClientToken``, so a
launch retried after a lost response can never start a second machine.

The package: ``options.py``, ``catalog.py`` (GPU instance types and prices), ``errors.py`` (EC2 error
codes in our taxonomy), ``wire.py`` (rows, launch parameters, spot prices; pure) and ``adapter.py``.
"""

from scalectl.providers.aws.adapter import AwsEc2Provider
from scalectl.providers.aws.options import DEFAULT_AMI_SSM_PARAMETER, AwsOptions
from scalectl.providers.aws.wire import instance_status, latest_spot_prices

__all__ = ["DEFAULT_AMI_SSM_PARAMETER", "AwsEc2Provider", "AwsOptions", "instance_status", "latest_spot_prices"]
