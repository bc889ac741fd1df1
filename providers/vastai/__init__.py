"""Vast.ai adapter: a marketplace of single machines ("asks"), rented on demand or interruptibly by bid.

Endpoints (details and caveats in docs/providers/vastai.md), all under ``config.base_url``
(default ``https://console.vast.ai``), with the key in an ``Authorization: Bearer`` header, never in URLs:

* ``POST /api/v0/bundles/`` searches offers (the JSON query the official CLI sends; ``type`` is
  ``on-demand`` or ``bid``). Each offer is one machine; its id is the ask id.
* ``PUT /api/v0/asks/{id}/`` rents it (``price`` set = an interruptible bid). An ask that is gone answers
  ``no_such_ask``: that is InsufficientCapacity, so placement moves on to the next offer.
* ``GET /api/v1/instances/`` lists instances, paged by ``next_token`` (25 a page);
  ``GET /api/v0/instances/{id}/`` shows one; ``DELETE /api/v0/instances/{id}/`` destroys one.

The instance ``label`` is our key; the container also gets ``SCALECTL_KEY`` / ``SCALECTL_CAPACITY`` in its
environment, which Vast shows back in ``extra_env``.

The package: ``options.py``, ``wire.py`` (Vast's JSON in our types, pure) and ``adapter.py`` (the requests
and error mapping, which learns Vast's rate-limit interval).
"""

from scalectl.providers.vastai.adapter import VastAIProvider
from scalectl.providers.vastai.options import VastOptions

__all__ = ["VastAIProvider", "VastOptions"]
