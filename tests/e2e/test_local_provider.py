"""LocalProvider with real processes: a placeholder stand-in on loopback ports, started and stopped here."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from scalectl.clocks import FakeClock
from scalectl.providers.base import Capacity, GpuRequest, InstanceStatus, LaunchSpec, Provider
from scalectl.providers.errors import InstanceNotFound
from scalectl.providers.registry import ProviderConfig, build_provider
from scalectl.serving.readiness import ReadinessProbe
from scalectl.sizing.gpus import GPUS
from scalectl.sizing.server import ServerDescription

pytestmark = pytest.mark.e2e
PLACEHOLDER = Path(__file__).with_name("placeholder_standin.py")
ROOT = Path(__file__).resolve().parents[2]


def _command(extra: tuple[str, ...] = ()) -> list[str]:
    # The real stand-in when this checkout has it, else the placeholder with the same CLI.
    if importlib.util.find_spec("scalectl.vllm_standin") is not None and not extra:
        return [sys.executable, "-m", "scalectl.vllm_standin"]
    return [sys.executable, str(PLACEHOLDER), *extra]


def _provider(tmp_path: Path, **options) -> Provider:
    opts = {"state_dir": str(tmp_path / "state"), "command": _command(), "cwd": str(ROOT), **options}
    return build_provider(ProviderConfig(name="local", type="local", options=opts), FakeClock())


async def _until(provider: Provider, pid: str, status: InstanceStatus, attempts: int = 200):
    inst = await provider.get(pid)
    for _ in range(attempts):  # bounded
        if inst.status is status:
            return inst
        await __import__("asyncio").sleep(0.05)
        inst = await provider.get(pid)
    raise AssertionError(f"{pid} stayed {inst.status}")


async def _launch(provider: Provider, key: str, model: str = "m/test", max_len: str = "2048") -> LaunchSpec:
    offer = (await provider.offers(GpuRequest("H100")))[0]
    return LaunchSpec(
        key=key,
        tier="chat",
        offer=offer,
        capacity=Capacity.ON_DEMAND,
        server=ServerDescription(model=model, args=("--max-model-len", max_len, "--max-num-seqs", "8")),
    )


async def test_lifecycle_ready_list_after_restart_and_delete(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    assert isinstance(provider, Provider)
    spec = await _launch(provider, "scalectl-chat-0001")
    created = await provider.create(spec)
    assert created.status is InstanceStatus.PENDING and created.address and created.key == spec.key
    try:
        again = await provider.create(spec)  # idempotent by key
        assert again.provider_id == created.provider_id and again.address == created.address
        running = await _until(provider, created.provider_id, InstanceStatus.RUNNING)

        probe = ReadinessProbe(FakeClock())
        try:
            verdict = await probe.check(running.address or "", "m/test", 2048)
        finally:
            await probe.aclose()
        assert verdict.ready, verdict.reason

        # A new provider object over the same state dir (a daemon restart) finds it.
        restarted = _provider(tmp_path)
        found = await restarted.list("scalectl-chat-")
        assert [i.provider_id for i in found] == [created.provider_id]
        assert found[0].status is InstanceStatus.RUNNING
        assert await restarted.list("scalectl-other-") == []
    finally:
        await provider.delete(created.provider_id)
    with pytest.raises(InstanceNotFound):
        await provider.get(created.provider_id)
    await provider.delete(created.provider_id)  # idempotent
    assert await provider.list("scalectl-") == []


async def test_sigkill_after_grace_when_sigterm_is_ignored(tmp_path: Path) -> None:
    provider = _provider(tmp_path, command=_command(("--ignore-sigterm",)), stop_grace_seconds=0.3)
    created = await provider.create(await _launch(provider, "scalectl-stubborn"))
    await _until(provider, created.provider_id, InstanceStatus.RUNNING)
    state = (tmp_path / "state" / f"{created.provider_id}.json").read_text()
    pid = int(__import__("json").loads(state)["pid"])
    await provider.delete(created.provider_id)
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z", stat.read_text()


async def test_dead_process_shows_failed_and_a_reused_pid_is_not_ours(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    created = await provider.create(await _launch(provider, "scalectl-crash"))
    await _until(provider, created.provider_id, InstanceStatus.RUNNING)
    path = tmp_path / "state" / f"{created.provider_id}.json"
    import json

    state = json.loads(path.read_text())
    os.kill(state["pid"], 9)
    await _until(provider, created.provider_id, InstanceStatus.FAILED)
    # A state file naming a live process that is not ours (this test process) is not trusted.
    state["pid"] = os.getpid()
    path.write_text(json.dumps(state))
    assert (await provider.get(created.provider_id)).status is InstanceStatus.FAILED
    await provider.delete(created.provider_id)  # must not signal the unrelated pid
    assert not path.exists()


async def test_offers(tmp_path: Path) -> None:
    free = await _provider(tmp_path).offers(GpuRequest("h100 sxm5", count=2))
    assert [(o.gpu, o.gpu_count, o.on_demand_per_hour) for o in free] == [("H100-SXM5-80GB", 2, 0.0)]
    seeded = await _provider(tmp_path, price="seed").offers(GpuRequest("L40S"))
    assert seeded[0].on_demand_per_hour == 0.72
    everything = await _provider(tmp_path).offers(GpuRequest(""))
    assert len(everything) == len(GPUS)
    assert await _provider(tmp_path).offers(GpuRequest("TPU")) == []


async def test_an_unreadable_state_file_fails_the_listing_instead_of_hiding_its_server(tmp_path: Path) -> None:
    from scalectl.providers.errors import ListingIncomplete

    provider = _provider(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "loc-00000001.json").write_text('{"key": "sc-chat-1", "pid": ', encoding="utf-8")  # torn write
    with pytest.raises(ListingIncomplete, match=r"loc-00000001\.json"):
        await provider.list("sc-")
    (state / "loc-00000001.json").unlink()
    assert await provider.list("sc-") == []
