"""Spheron AI adapter (https://app.spheron.ai, Bearer key). Translates only.

Spheron is a GPU marketplace: ``GET /api/gpu-offers`` lists offers from several upstream providers
(voltage-park, data-crunch, sesterce, massed-compute, spheron-ai, ...), each with a GPU type and
count, a whole-instance $/hour ``price`` (``spot_price`` on SPOT offers), the regions it can land
in (``clusters``) and the OS images it takes. A deployment must be built from ONE offer's fields, so
our ``Offer.offer_id`` carries them all (see ``OfferRef``). Deployments are named with our key.

Deleting before the minimum runtime (20 min) is refused with 400 ``canTerminate: false`` and a
``timeRemaining`` in minutes; that becomes ``DeleteDeferred(retry_after=...)`` and the caller retries
on a later tick: this adapter never waits it out.

The package: ``options.py`` (what a provider block may set), ``wire.py`` (Spheron's JSON and errors in our
types, pure) and ``adapter.py`` (the requests).
"""

from scalectl.providers.spheron.adapter import SpheronProvider
from scalectl.providers.spheron.options import SpheronOptions, check_options
from scalectl.providers.spheron.wire import OfferRef, canonical_gpu, cloud_init_payload

__all__ = ["OfferRef", "SpheronOptions", "SpheronProvider", "canonical_gpu", "check_options", "cloud_init_payload"]
