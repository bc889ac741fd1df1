"""Every registered adapter declares what it is, and renders a launch in the bootstrap form it declares.

Checked on the adapter classes (no credentials, no backend): the declaration is typed and consistent, and
``render_launch`` turns one server description into exactly the form the declaration names. The shared
contract (suite.py) then sends such a launch through each adapter's real ``create``.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
import yaml

from scalectl.clocks import FakeClock
from scalectl.providers.base import BootstrapForm, ProviderCapabilities
from scalectl.providers.errors import NotSupported
from scalectl.providers.registry import ADAPTERS, ProviderConfig, adapter_class, build_provider, capabilities_of
from scalectl.serving.bootstrap.cloud_init import CloudConfig
from scalectl.serving.bootstrap.container import ContainerLaunch
from scalectl.serving.bootstrap.validate import validate_user_data
from scalectl.sizing.server import ServerDescription, arg_value

SERVER = ServerDescription(
    model="meta-llama/Llama-3.1-8B-Instruct",
    args=("--max-model-len", "8192", "--max-num-seqs", "64", "--gpu-memory-utilization", "0.9"),
    port=8001,
    image="vllm/vllm-openai:v0.17.1",
    env={"VLLM_NO_USAGE_STATS": "1"},
    secret_env=("HF_TOKEN",),
)


def _check_cloud_init(rendered: Any) -> None:
    assert isinstance(rendered, CloudConfig)
    doc = validate_user_data(rendered.user_data())  # the text form parses and matches the schema
    assert doc == yaml.safe_load(rendered.user_data())
    unit = next(f["content"] for f in rendered.doc["write_files"] if f["path"].endswith(".service"))
    assert shlex.join(["serve", SERVER.model, *SERVER.args]) in unit


def _check_container(rendered: Any) -> None:
    assert isinstance(rendered, ContainerLaunch)
    assert rendered.image == SERVER.image
    assert rendered.args == ("--model", SERVER.model, *SERVER.args)
    assert rendered.ports == (SERVER.port,)
    assert rendered.env["VLLM_NO_USAGE_STATS"] == "1" and rendered.env["HF_TOKEN"] == "${secret:HF_TOKEN}"


def _check_ssh_script(rendered: Any) -> None:
    assert isinstance(rendered, str) and rendered.startswith("#!")
    assert shlex.join(["serve", SERVER.model, *SERVER.args]) in rendered


def _check_standin(rendered: Any) -> None:
    assert isinstance(rendered, tuple)
    assert rendered[:2] == ("--model", SERVER.model)
    assert arg_value(rendered, "--max-model-len") == "8192" and arg_value(rendered, "--max-num-seqs") == "64"


def _check_none(rendered: Any) -> None:
    assert rendered is None


CHECKS = {
    BootstrapForm.CLOUD_INIT: _check_cloud_init,
    BootstrapForm.CONTAINER: _check_container,
    BootstrapForm.SSH_SCRIPT: _check_ssh_script,
    BootstrapForm.STANDIN: _check_standin,
    BootstrapForm.NONE: _check_none,
}


def test_every_form_has_a_check() -> None:
    assert set(CHECKS) == set(BootstrapForm)


@pytest.mark.parametrize("type_name", sorted(ADAPTERS))
def test_the_adapter_declares_typed_capabilities(type_name: str) -> None:
    cls: Any = adapter_class(type_name)
    caps = cls.capabilities
    assert isinstance(caps, ProviderCapabilities), f"{type_name}: capabilities must be a ProviderCapabilities"
    assert capabilities_of(type_name) is caps
    assert isinstance(caps.bootstrap, BootstrapForm)
    assert caps.list_page_size is None or caps.list_page_size >= 1
    assert caps.list_max_pages is None or caps.list_max_pages >= 1
    if caps.running_means_ready:  # no probe would ever run: only true where nothing of ours boots
        assert not caps.launches_server
    if caps.stop_start:  # what a stop leaves billing is part of the declaration, with its source in the docs
        assert caps.billed_while_stopped, f"{type_name}: stop_start without billed_while_stopped"
    else:
        assert not caps.billed_while_stopped and not caps.resume_may_fail_no_capacity, f"{type_name}: no stop"
    for method in ("offers", "create", "get", "list", "delete", "stop", "start", "aclose", "render_launch"):
        assert callable(getattr(cls, method, None)), f"{type_name}: no {method}"


@pytest.mark.parametrize("type_name", sorted(ADAPTERS))
def test_the_adapter_renders_its_declared_form_from_a_server_description(type_name: str) -> None:
    cls: Any = adapter_class(type_name)
    rendered = cls.render_launch(SERVER)
    CHECKS[cls.capabilities.bootstrap](rendered)
    assert cls.render_launch(SERVER) == rendered  # pure: the same description renders the same launch


async def test_the_local_provider_refuses_stop_and_start_without_touching_anything(tmp_path: Any) -> None:
    # The local adapter has no contract harness (its instances are processes): its refusal is checked here.
    provider = build_provider(
        ProviderConfig(name="local", type="local", options={"state_dir": str(tmp_path / "state")}), FakeClock()
    )
    for operation in (provider.stop, provider.start):
        with pytest.raises(NotSupported, match="not supported"):
            await operation("local-000001")
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())
    await provider.aclose()
