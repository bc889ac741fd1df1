"""The installed package's version (the CLI's --version and the daemon's scalectl_build_info)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def scalectl_version() -> str:
    try:
        return version("scalectl")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"
