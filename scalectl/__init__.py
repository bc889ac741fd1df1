"""scalectl: a GPU fleet autoscaler for LLM agent fleets.

The one import root of the distribution. ``controller``, ``providers``, ``policies`` and ``migrations`` live at
the top of the source tree (the project's layout) and are part of this package through links in this folder;
an installed wheel holds them here as plain subpackages. Nothing is imported at import time."""
