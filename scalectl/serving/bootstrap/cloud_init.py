"""cloud-init user-data for VMs and bare metal: files from the shared parts, then enable the unit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scalectl.serving.bootstrap import parts
from scalectl.sizing.server import ServerDescription


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, so the user-data stays readable."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _str)


def cloud_config(desc: ServerDescription) -> dict[str, Any]:
    unit_path = f"/etc/systemd/system/{desc.unit_name}.service"

    def file(path: str, content: str, mode: str) -> dict[str, str]:
        return {"path": path, "permissions": mode, "owner": "root:root", "content": content}

    return {
        "write_files": [
            file(parts.CACHE_SCRIPT, parts.cache_script(desc), "0755"),
            file(parts.INSTALL_SCRIPT, parts.install_script(desc), "0755"),
            file(parts.ENV_FILE, parts.env_file(desc), "0644"),
            file(unit_path, parts.systemd_unit(desc), "0644"),
            {
                "path": f"{parts.CONF_DIR}/INTERRUPTIONS.txt",
                "permissions": "0644",
                "content": parts.INTERRUPTION_NOTE.format(unit=desc.unit_name),
            },
        ],
        # bootcmd runs on every boot, before write_files: on the first boot the script is not there yet
        # (runcmd runs it); on later boots it remounts the cache disk before the unit starts.
        "bootcmd": [f"[ ! -x {parts.CACHE_SCRIPT} ] || {parts.CACHE_SCRIPT}"] if not desc.cache_dir else [],
        "runcmd": [
            [parts.CACHE_SCRIPT],
            [parts.INSTALL_SCRIPT],
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", f"{desc.unit_name}.service"],
        ],
    }  # fmt: skip


def render_user_data(desc: ServerDescription) -> str:
    return CloudConfig.of(desc).user_data()


@dataclass(frozen=True, slots=True)
class CloudConfig:
    """A cloud-config document as data: user-data clouds take its text, structured ones (Spheron) its keys."""

    doc: Mapping[str, Any]

    @classmethod
    def of(cls, desc: ServerDescription) -> CloudConfig:
        return cls(cloud_config(desc))

    def user_data(self) -> str:
        body = yaml.dump(dict(self.doc), Dumper=_LiteralDumper, sort_keys=False, width=1000)
        return "#cloud-config\n# Rendered by scalectl from one server description; edit the tier, not this.\n" + body
