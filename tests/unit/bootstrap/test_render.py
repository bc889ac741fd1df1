"""One description, three forms: cloud-init (parsed + schema-checked), container args, SSH script."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest
import yaml

from scalectl.serving.bootstrap.cloud_init import render_user_data
from scalectl.serving.bootstrap.container import container_launch
from scalectl.serving.bootstrap.ssh_script import render_ssh_script
from scalectl.serving.bootstrap.validate import InvalidUserData, cloud_init_schema_check, validate_user_data
from scalectl.sizing.server import ServerDescription, resolve_secret_refs
from scalectl.tiers.config import parse_config
from scalectl.tiers.server import describe_tier_server

TIERS = """
tiers:
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated]
    min: 1
    max: 4
    drain_timeout: 90s
    policy: {kind: min-floor, floor: 1}
  batch:
    capacity: spot
    gpu: A100-80GB-PCIe
    providers: [simulated]
    min: 0
    max: 4
    policy: {kind: scale-to-zero}
    serving: {model: Qwen/Qwen2.5-7B-Instruct, max_model_len: 8192, model_cache_dir: /data/models}
"""


@pytest.fixture
def config():
    return parse_config(TIERS, "tiers.yaml")


def _unit(user_data: str) -> str:
    doc = yaml.safe_load(user_data)
    return next(f["content"] for f in doc["write_files"] if f["path"].endswith(".service"))


def test_cloud_init_parses_and_matches_the_schema(config) -> None:
    user_data = render_user_data(describe_tier_server(config.tiers["chat"]))
    doc = validate_user_data(user_data)
    paths = [f["path"] for f in doc["write_files"]]
    assert "/etc/systemd/system/scalectl-vllm.service" in paths
    assert ["systemctl", "enable", "--now", "scalectl-vllm.service"] in doc["runcmd"]
    unit = _unit(user_data)
    exec_line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_line.removeprefix("ExecStart="))
    assert argv[:4] == ["/usr/bin/env", "vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8"
    assert argv[argv.index("--shutdown-timeout") + 1] == "90"
    assert "TimeoutStopSec=120" in unit  # drain 90 s + margin
    assert "EnvironmentFile=-/etc/scalectl/secrets.env" in unit


def test_nvme_detection_with_fallback_unless_a_cache_dir_is_set(config) -> None:
    auto = validate_user_data(render_user_data(describe_tier_server(config.tiers["chat"])))
    script = next(f["content"] for f in auto["write_files"] if f["path"].endswith("scalectl-model-cache"))
    assert "nvme" in script and "/var/cache/scalectl/models" in script and "mkfs.ext4" in script
    assert auto["bootcmd"], "the cache disk must be remounted on every boot"
    fixed = validate_user_data(render_user_data(describe_tier_server(config.tiers["batch"])))
    script = next(f["content"] for f in fixed["write_files"] if f["path"].endswith("scalectl-model-cache"))
    assert "CACHE=/data/models" in script and "mkfs" not in script


@pytest.mark.skipif(shutil.which("cloud-init") is None, reason="cloud-init not installed (apt-get install cloud-init)")
def test_cloud_init_schema_command_accepts_it(config) -> None:
    verdict = cloud_init_schema_check(render_user_data(describe_tier_server(config.tiers["chat"])))
    assert verdict is not None and verdict[0], verdict


def test_schema_check_catches_mistakes() -> None:
    with pytest.raises(InvalidUserData, match="#cloud-config"):
        validate_user_data("write_files: []\n")
    with pytest.raises(InvalidUserData, match="permissions"):
        validate_user_data(
            "#cloud-config\nwrite_files:\n- {path: /x, content: y, permissions: '777'}\nruncmd: [[ls]]\n"
        )
    with pytest.raises(InvalidUserData, match="Additional properties"):
        validate_user_data("#cloud-config\nwrite_files:\n- {path: /x, content: y}\nruncmd: []\nrun_cmd: []\n")


def test_container_form_uses_the_same_arguments(config) -> None:
    desc = describe_tier_server(config.tiers["batch"])
    b = container_launch(desc)
    assert b.image == "vllm/vllm-openai:v0.17.1"
    assert b.args[:2] == ("--model", "Qwen/Qwen2.5-7B-Instruct")
    assert b.args[2:] == desc.args
    assert "--kv-cache-dtype" not in b.args and b.args[b.args.index("--dtype") + 1] == "bfloat16"  # A100
    assert b.env["HF_HOME"] == "/data/models"
    assert b.env["HF_TOKEN"] == "${secret:HF_TOKEN}"
    assert b.ports == (8000,)
    resolved = resolve_secret_refs(b.env, {"HF_TOKEN": "hf_abc"})
    assert resolved["HF_TOKEN"] == "hf_abc"
    assert "HF_TOKEN" not in resolve_secret_refs(b.env, {})


def test_three_forms_come_from_one_description(config) -> None:
    desc = describe_tier_server(config.tiers["chat"])
    tuned_line = shlex.join(["serve", desc.model, *desc.args])
    assert tuned_line in render_user_data(desc)
    assert tuned_line in render_ssh_script(desc)
    assert list(container_launch(desc).args[2:]) == list(desc.args)


def test_ssh_script_is_valid_bash(config, tmp_path) -> None:
    script = render_ssh_script(describe_tier_server(config.tiers["chat"]))
    path = tmp_path / "bootstrap.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert "install -m 0600" in script and "secrets.env" in script


def test_secret_values_never_rendered(config, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    desc = describe_tier_server(config.tiers["chat"])
    for rendered in (render_user_data(desc), repr(container_launch(desc)), render_ssh_script(desc), repr(desc)):
        assert "hf_supersecretvalue" not in rendered
    with pytest.raises(ValueError, match="secret_env"):
        ServerDescription(model="m", args=(), env={"HF_TOKEN": "x"}, secret_env=("HF_TOKEN",))
