"""A provider that runs vLLM stand-in servers as local processes on free loopback ports.

For development, demos and end-to-end tests: each "instance" is ``python -m scalectl.vllm_standin --host 127.0.0.1
--port N --model M --max-model-len L [--max-num-seqs S] [--speed F]`` in its own session. A JSON state
file per instance (in ``options.state_dir``) lets ``list()`` find them after a daemon restart; a pid is
only trusted when its start time and command line still match what was recorded (pids get reused).

Options: ``state_dir``, ``command`` (argv replacing ``python -m scalectl.vllm_standin``), ``stop_grace_seconds``
(SIGTERM to SIGKILL, default 10), ``speed``, ``price`` ("zero" or "seed"), ``max_model_len`` and
``max_num_seqs`` defaults when the launch arguments carry none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

from scalectl.clocks import Clock
from scalectl.providers.base import (
    BootstrapForm,
    Capacity,
    GpuRequest,
    InstanceStatus,
    LaunchSpec,
    LocalState,
    Offer,
    ProviderCapabilities,
    ProviderInstance,
)
from scalectl.providers.errors import InstanceNotFound, InvalidRequest, ListingIncomplete, Transient
from scalectl.providers.registry import ProviderConfig
from scalectl.providers.stop_start import refuse
from scalectl.serving.bootstrap.standin import standin_args
from scalectl.sizing.gpus import GPUS, UnknownGpu, normalize_gpu
from scalectl.sizing.server import ServerDescription

DEFAULT_STATE_DIR = "~/.local/state/scalectl/local-provider"
HOST = "127.0.0.1"
POLL_INTERVAL = 0.05


def _arg(args: tuple[str, ...], flag: str) -> str | None:
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            return args[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def reserve_port() -> int:
    """A free loopback port held for our server: left in TIME_WAIT by a connection opened and closed here
    (the accepting side first), so for about a minute the kernel gives it to no other ``bind`` without
    SO_REUSEADDR (every ``bind(0)``), while a server that binds with it (uvicorn, vLLM) takes it at once.
    A port merely bound and released could go to another process first, whose server would then answer
    on our instance's address and read as ours starting."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((HOST, 0))
        server.listen(1)
        port = int(server.getsockname()[1])
        with socket.create_connection((HOST, port), timeout=2.0):
            accepted, _ = server.accept()
            accepted.close()
    return port


def _proc_start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if not fields or fields[0] == "Z":
        return None
    return fields[19]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _spawn(argv: list[str], log_path: Path, cwd: str | None) -> subprocess.Popen[bytes]:
    """Start the server in its own session (so it outlives the daemon and takes its children down with it).

    A plain Popen (fork + exec, fast) rather than an asyncio subprocess: the process must not be tied to
    the event loop that started it."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd
        )


class LocalProvider:
    # A process is "running" before its server answers: readiness is probed. Spot offers exist for tests
    # of the spot path; nothing ever interrupts them. list() reads every state file and keeps ours.
    capabilities: ClassVar[ProviderCapabilities] = ProviderCapabilities(
        bootstrap=BootstrapForm.STANDIN,
        spot=True,
        # The implicit provider keeps its instances' state files in the daemon's data dir; a configured
        # entry uses options.state_dir, else DEFAULT_STATE_DIR.
        local_state=LocalState("state_dir", "local-instances"),
        stop_start=False,  # a process is started and killed, never paused
    )

    @staticmethod
    def render_launch(server: ServerDescription) -> tuple[str, ...]:
        return standin_args(server)

    def __init__(self, config: ProviderConfig, clock: Clock):
        opts = dict(config.options)
        self.name = config.name
        self._clock = clock
        self._state_dir = Path(str(opts.get("state_dir") or DEFAULT_STATE_DIR)).expanduser()
        command = opts.get("command")
        self._command = [str(c) for c in command] if command else [sys.executable, "-m", "scalectl.vllm_standin"]
        self._grace = float(opts.get("stop_grace_seconds", 10.0))
        self._speed = opts.get("speed")
        self._seed_prices = opts.get("price", "zero") == "seed"
        self._default_len = int(opts.get("max_model_len", 4096))
        self._default_seqs = opts.get("max_num_seqs")
        self._cwd = opts.get("cwd")
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # -- offers -------------------------------------------------------------------------------------------

    async def offers(self, want: GpuRequest) -> list[Offer]:
        if want.regions and "local" not in want.regions:
            return []
        try:
            names = [normalize_gpu(want.gpu)] if want.gpu else list(GPUS)
        except UnknownGpu:
            return []
        out = []
        for name in names:
            gpu = GPUS[name]
            od = gpu.on_demand_per_hour * want.count if self._seed_prices else 0.0
            spot = (gpu.spot_per_hour or gpu.on_demand_per_hour) * want.count if self._seed_prices else 0.0
            out.append(Offer(self.name, f"local-{name}-x{want.count}", name, want.count, "local", od, spot))
        return out

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def create(self, spec: LaunchSpec) -> ProviderInstance:
        provider_id = self._id_for(spec.key)
        existing = self._read(provider_id)
        if existing is not None and self._alive(existing):
            return await self._describe(existing)
        args = self.render_launch(spec.server) if spec.server is not None else ()
        model = _arg(args, "--model") or spec.tags.get("model") or "stand-in"
        max_len = _arg(args, "--max-model-len") or str(self._default_len)
        seqs = _arg(args, "--max-num-seqs") or (str(self._default_seqs) if self._default_seqs else None)
        port = reserve_port()
        argv = [*self._command, "--host", HOST, "--port", str(port), "--model", model, "--max-model-len", max_len]
        if seqs:
            argv += ["--max-num-seqs", seqs]
        if self._speed is not None:
            argv += ["--speed", str(self._speed)]
        self._state_dir.mkdir(parents=True, exist_ok=True)
        try:
            proc = _spawn(argv, self._state_dir / f"{provider_id}.log", self._cwd)
        except OSError as exc:
            raise InvalidRequest(f"cannot start {argv[0]}: {exc.strerror}", provider=self.name) from None
        self._children[proc.pid] = proc
        state = {
            "provider_id": provider_id,
            "key": spec.key,
            "tier": spec.tier,
            "pid": proc.pid,
            "start_time": _proc_start_time(proc.pid),
            "port": port,
            "model": model,
            "gpu": spec.offer.gpu,
            "gpu_count": spec.offer.gpu_count,
            "capacity": spec.capacity.value,
            "price_per_hour": spec.offer.price(spec.capacity),
            "created_at": self._clock.now(),
        }
        self._write(provider_id, state)
        return self._instance(state, InstanceStatus.PENDING, "starting")

    async def get(self, provider_id: str) -> ProviderInstance:
        state = self._read(provider_id)
        if state is None:
            raise InstanceNotFound(f"no local instance {provider_id}", provider=self.name)
        return await self._describe(state)

    async def list(self, key_prefix: str) -> list[ProviderInstance]:
        if not self._state_dir.is_dir():
            return []
        out = []
        for path in sorted(self._state_dir.glob("*.json")):
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue  # deleted while we listed: gone, not hidden
            except (OSError, ValueError) as exc:
                # A state file we cannot read may be a running server: never list around it.
                raise ListingIncomplete(
                    f"cannot read {path}: {exc}; fix or remove the file (its server may still run)", provider=self.name
                ) from None
            if not isinstance(state, dict):
                raise ListingIncomplete(f"{path} does not hold a JSON object; fix or remove it", provider=self.name)
            if str(state.get("key", "")).startswith(key_prefix):
                out.append(await self._describe(state))
        return out

    async def delete(self, provider_id: str) -> None:
        state = self._read(provider_id)
        if state is None:
            return  # already gone: success
        if self._alive(state):
            pid = int(state["pid"])
            self._signal(pid, signal.SIGTERM)
            if not await self._wait_gone(state, self._grace):
                self._signal(pid, signal.SIGKILL)
                if not await self._wait_gone(state, 5.0):
                    raise Transient(f"local instance {provider_id} (pid {pid}) survived SIGKILL", provider=self.name)
        self._reap(int(state["pid"]))
        (self._state_dir / f"{provider_id}.json").unlink(missing_ok=True)

    async def stop(self, provider_id: str) -> None:
        raise refuse("stop", provider=self.name, why="local stand-in processes are killed, never paused")

    async def start(self, provider_id: str) -> None:
        raise refuse("start", provider=self.name, why="local stand-in processes are killed, never paused")

    async def aclose(self) -> None:
        """Leaves the processes running: they are instances, and list() adopts them after a restart."""
        for pid in list(self._children):
            self._reap(pid)

    # -- helpers ------------------------------------------------------------------------------------------

    @staticmethod
    def _id_for(key: str) -> str:
        return "local-" + re.sub(r"[^A-Za-z0-9_.-]", "_", key)

    def _read(self, provider_id: str) -> dict[str, Any] | None:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", provider_id):
            return None
        try:
            data = json.loads((self._state_dir / f"{provider_id}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _write(self, provider_id: str, state: dict[str, Any]) -> None:
        path = self._state_dir / f"{provider_id}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        os.replace(tmp, path)

    def _alive(self, state: dict[str, Any]) -> bool:
        """The recorded pid is running and is still our process (same start time, same port argument)."""
        pid = int(state.get("pid", 0))
        child = self._children.get(pid)
        if child is not None:  # started by this process: poll() is exact (and reaps), even before exec
            if child.poll() is None:
                return True
            del self._children[pid]
            return False
        started = _proc_start_time(pid)
        if started is None or (state.get("start_time") and started != state["start_time"]):
            return False
        argv = _cmdline(pid)
        return "--port" in argv and str(state.get("port")) in argv

    def _reap(self, pid: int) -> None:
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            del self._children[pid]

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pid, sig)  # the server and anything it spawned (its own session)
        except ProcessLookupError:  # not yet its own group leader (signalled right after fork)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        except PermissionError:
            pass

    async def _wait_gone(self, state: dict[str, Any], seconds: float) -> bool:
        for _ in range(max(1, int(seconds / POLL_INTERVAL))):  # bounded wait, no busy loop
            if not self._alive(state):
                return True
            await asyncio.sleep(POLL_INTERVAL)
        return not self._alive(state)

    async def _describe(self, state: dict[str, Any]) -> ProviderInstance:
        if not self._alive(state):
            return self._instance(state, InstanceStatus.FAILED, "exited")
        if await self._port_open(int(state["port"])):
            return self._instance(state, InstanceStatus.RUNNING, "serving")
        return self._instance(state, InstanceStatus.PENDING, "starting")

    @staticmethod
    async def _port_open(port: int) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), timeout=0.5)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    def _instance(self, state: dict[str, Any], status: InstanceStatus, raw: str) -> ProviderInstance:
        return ProviderInstance(
            provider=self.name,
            provider_id=str(state["provider_id"]),
            key=str(state["key"]),
            status=status,
            raw_status=raw,
            gpu=state.get("gpu"),
            gpu_count=state.get("gpu_count"),
            region="local",
            capacity=Capacity(state["capacity"]) if state.get("capacity") else None,
            price_per_hour=state.get("price_per_hour"),
            address=f"{HOST}:{state['port']}",
            created_at=state.get("created_at"),
        )
