"""RunPod adapter: on-demand pods over REST v2, interruptible (spot) pods and prices over GraphQL.

Which API does what, and why (details in docs/providers/runpod.md):

* ``https://api.runpod.io/v2/pods`` (REST v2, the successor of ``https://rest.runpod.io/v1``, which RunPod
  marks deprecated) creates, reads, lists and deletes pods. It has no interruptible pods and no spot
  prices, so:
* ``https://api.runpod.io/graphql`` rents interruptible pods with a bid (``podRentInterruptable``) and
  reads GPU types with on-demand and spot prices and stock (``gpuTypes``). GraphQL reports errors as
  HTTP 200 with an ``errors`` array; they are mapped like HTTP errors.

Both live on one host, so one base URL (``config.base_url``) serves both. The pod name is our key; the
pod also carries ``SCALECTL_KEY`` and ``SCALECTL_CAPACITY`` in its environment, which is how ``list``
tells ours from look-alikes and how an ``EXITED`` interruptible pod is recognised as preempted.

The package: ``options.py``, ``wire.py`` (RunPod's JSON and errors in our types, pure) and ``adapter.py``
(the requests).
"""

from scalectl.providers.runpod.adapter import RunPodProvider
from scalectl.providers.runpod.options import RunPodOptions

__all__ = ["RunPodOptions", "RunPodProvider"]
