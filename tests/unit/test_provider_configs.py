"""provider_configs: adapters that keep state on this machine get it under the data dir, as their
capabilities declare; other adapters' options pass through untouched."""

from __future__ import annotations

from pathlib import Path

from scalectl.controller.app import provider_configs
from scalectl.controller.settings import Settings
from scalectl.tiers.config import parse_config

TIERS = """
tiers:
  chat:
    capacity: on-demand
    gpu: H100-SXM5-80GB
    providers: [simulated, local, slowsim, mine, pod]
    min: 0
    max: 2
    policy: {kind: min-floor, floor: 0}
providers:
  slowsim: {type: simulated, options: {provision_delay_min: 5}}
  mine: {type: local}
  pod: {type: runpod, options: {default_image: "vllm/vllm-openai:v0.8.5"}}
"""


def test_local_state_defaults_follow_the_declared_capabilities(tmp_path: Path) -> None:
    configs = provider_configs(parse_config(TIERS, "tiers.yaml"), Settings(data_dir=tmp_path))
    assert dict(configs["simulated"].options) == {"state_path": str(tmp_path / "simulated-cloud.json")}
    assert dict(configs["local"].options) == {"state_dir": str(tmp_path / "local-instances")}
    assert dict(configs["slowsim"].options) == {
        "provision_delay_min": 5,
        "state_path": str(tmp_path / "simulated-cloud-slowsim.json"),
    }
    assert dict(configs["mine"].options) == {}  # a configured local provider keeps its own default
    assert dict(configs["pod"].options) == {"default_image": "vllm/vllm-openai:v0.8.5"}
    assert (configs["simulated"].type, configs["local"].type) == ("simulated", "local")


def test_an_explicit_state_option_wins(tmp_path: Path) -> None:
    text = TIERS.replace("provision_delay_min: 5", f"state_path: {tmp_path / 'elsewhere.json'}")
    configs = provider_configs(parse_config(text, "tiers.yaml"), Settings(data_dir=tmp_path))
    assert configs["slowsim"].options["state_path"] == str(tmp_path / "elsewhere.json")
