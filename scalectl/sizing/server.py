"""One description of a model server, from which every bootstrap form is rendered.

Secrets never live here: ``secret_env`` lists the *names* of environment variables (``HF_TOKEN``) the
server needs. Rendered forms refer to them; the value reaches the machine out of band (the provider's
secret store, an env file uploaded over SSH with mode 0600), never in user-data, logs or reprs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_CACHE_DIR = "/var/cache/scalectl/models"
NVME_MOUNT = "/mnt/scalectl-nvme"
SECRET_REF = re.compile(r"^\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}$")


def secret_ref(name: str) -> str:
    """The placeholder a container env carries for a secret: ``${secret:HF_TOKEN}``."""
    return "${secret:" + name + "}"


def arg_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` (the last one wins, as with argparse), ``--flag V`` or ``--flag=V``."""
    found = None
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            found = args[i + 1]
        elif token.startswith(flag + "="):
            found = token.split("=", 1)[1]
    return found


def resolve_secret_refs(env: Mapping[str, str], lookup: Mapping[str, str]) -> dict[str, str]:
    """Replace ``${secret:NAME}`` values with ``lookup[NAME]`` (adapters call this at launch, never log it).

    A missing secret is dropped, not sent empty: the server then fails its own auth check loudly."""
    out: dict[str, str] = {}
    for key, value in env.items():
        match = SECRET_REF.match(value)
        if match is None:
            out[key] = value
        elif match.group(1) in lookup:
            out[key] = lookup[match.group(1)]
    return out


@dataclass(frozen=True, slots=True)
class ServerDescription:
    model: str
    args: tuple[str, ...]  # after the model: `vllm serve MODEL *args`
    port: int = 8000
    image: str = "vllm/vllm-openai:v0.17.1"
    env: Mapping[str, str] = field(default_factory=dict)  # plain settings only
    secret_env: tuple[str, ...] = ()  # names of secret env vars, e.g. ("HF_TOKEN",)
    cache_dir: str | None = None  # None: a spare local NVMe when present, else DEFAULT_CACHE_DIR
    unit_name: str = "scalectl-vllm"
    stop_timeout: int = 150  # systemd TimeoutStopSec: the drain time plus margin
    vllm_version: str | None = None  # pip version for VMs without vllm; from the image tag when it is one

    def __post_init__(self) -> None:
        for key, value in self.env.items():
            if SECRET_REF.match(value) or key in self.secret_env:
                raise ValueError(f"env {key!r}: secrets go in secret_env by name, not in env")

    @property
    def pip_version(self) -> str | None:
        if self.vllm_version:
            return self.vllm_version
        tag = self.image.rsplit(":", 1)[-1] if ":" in self.image else ""
        return tag.lstrip("v") if re.fullmatch(r"v?\d+(\.\d+)*", tag) else None
