"""nginx as a RoutingTarget: one file per tier, written atomically, checked with ``nginx -t``, reloaded.

A change that fails ``nginx -t`` is rolled back to the previous file, so nginx never loads it. Nothing is
written or reloaded when the rendered file is unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from scalectl.serving.routing.base import Endpoint, RoutingError, RoutingResult, TierRoute
from scalectl.serving.routing.nginx_conf import render_tier

OUTPUT_TAIL = 2000


def write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename over, fsync the directory: never a half-written file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class NginxTarget:
    """Writes ``<config_dir>/scalectl-<tier>.conf``; the main nginx.conf must include that directory in http{}."""

    def __init__(
        self,
        config_dir: str | Path,
        *,
        nginx_bin: str = "nginx",
        main_conf: str | Path | None = None,
        prefix: str | Path | None = None,
        test_command: Sequence[str] | None = None,
        reload_command: Sequence[str] | None = None,
        command_timeout: float = 30.0,
    ):
        self.config_dir = Path(config_dir)
        common: list[str] = []
        if prefix is not None:
            common += ["-p", str(prefix)]
        if main_conf is not None:
            common += ["-c", str(main_conf)]
        self.test_command = list(test_command) if test_command else [nginx_bin, *common, "-t", "-q"]
        self.reload_command = list(reload_command) if reload_command else [nginx_bin, *common, "-s", "reload"]
        self.command_timeout = command_timeout
        self._lock = asyncio.Lock()  # nginx -t checks the whole config: one change at a time

    def path_for(self, tier: str) -> Path:
        return self.config_dir / f"scalectl-{tier}.conf"

    async def apply(self, tier: TierRoute, endpoints: Sequence[Endpoint]) -> RoutingResult:
        text = render_tier(tier, endpoints)
        path = self.path_for(tier.name)
        async with self._lock:
            previous = path.read_text(encoding="utf-8") if path.exists() else None
            if previous == text:
                return RoutingResult(tier.name, changed=False, reloaded=False, endpoints=len(endpoints), path=str(path))
            self.config_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
            ok, output = await self._run(self.test_command)
            if not ok:
                self._restore(path, previous)
                raise RoutingError(f"nginx rejected the config for tier {tier.name}; kept the previous one: {output}")
            ok, output = await self._run(self.reload_command)
            if not ok:
                raise RoutingError(f"nginx reload failed for tier {tier.name} (config is valid and written): {output}")
        return RoutingResult(tier.name, changed=True, reloaded=True, endpoints=len(endpoints), path=str(path))

    async def remove(self, tier: str) -> bool:
        """Drop a tier's file (tier deleted from the config); reloads when something was removed."""
        path = self.path_for(tier)
        async with self._lock:
            if not path.exists():
                return False
            previous = path.read_text(encoding="utf-8")
            path.unlink()
            ok, output = await self._run(self.test_command)
            if not ok:
                self._restore(path, previous)
                raise RoutingError(f"nginx rejected the config without tier {tier}; kept it: {output}")
            ok, output = await self._run(self.reload_command)
            if not ok:
                raise RoutingError(f"nginx reload failed after removing tier {tier}: {output}")
        return True

    @staticmethod
    def _restore(path: Path, previous: str | None) -> None:
        if previous is None:
            path.unlink(missing_ok=True)
        else:
            write_atomically(path, previous)

    async def _run(self, command: Sequence[str]) -> tuple[bool, str]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
        except OSError as exc:
            return False, f"cannot run {command[0]}: {exc.strerror}"
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.command_timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return False, f"{' '.join(command)} timed out after {self.command_timeout:g}s"
        text = out.decode(errors="replace").strip()[-OUTPUT_TAIL:]
        return proc.returncode == 0, text
