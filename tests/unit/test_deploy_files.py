"""The image, the compose stack and the install extras: what an operator copies must be complete and lean."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from scalectl.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def test_the_image_is_multi_stage_on_a_pinned_base_without_the_plotting_stack() -> None:
    text = (DEPLOY / "Containerfile").read_text()
    assert len(re.findall(r"^FROM ", text, re.MULTILINE)) >= 2
    assert re.search(r"^ARG PYTHON_IMAGE=python:\d+\.\d+\.\d+-slim-[a-z]+$", text, re.MULTILINE)
    assert "latest" not in text and "matplotlib" not in text and "[plot]" not in text
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("**")] == "**"  # everything excluded, then the sources allowed back
    copied = set(re.findall(r"^COPY (\S+) ", text, re.MULTILINE)) - {"pyproject.toml"}
    for path in copied:
        assert f"!{path}/" in ignore or f"!{path}" in ignore, f"{path} is copied but .dockerignore drops it"
    packaged = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    missing = {pattern.rstrip("*") for pattern in packaged["include"]} - copied
    assert not missing, f"packages the wheel includes but the image build does not copy: {sorted(missing)}"
    linked = {link.name for link in (ROOT / "scalectl").iterdir() if link.is_symlink()}
    assert linked == {"controller", "migrations", "policies", "providers"}
    assert not linked - copied, f"scalectl/ links to folders the image build does not copy: {sorted(linked - copied)}"


def test_compose_has_its_files_and_checks_postgres_with_a_password() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert "trust" not in (DEPLOY / "compose.yaml").read_text()
    postgres = services["postgres"]
    assert "PGPASSWORD" in " ".join(postgres["healthcheck"]["test"])
    assert "scram-sha-256" in postgres["environment"]["POSTGRES_INITDB_ARGS"]
    daemons = [name for name in services if name.startswith("scalectl")]
    assert len(daemons) >= 2, "two daemon replicas: one leads, one stands by"
    for service in (*daemons, "postgres"):
        assert services[service]["env_file"] == "./scalectl.env"
    for daemon in daemons:
        assert services[daemon]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    template = dict(
        line.split("=", 1) for line in (DEPLOY / "scalectl.env.example").read_text().splitlines() if "=" in line
        and not line.startswith("#")
    )  # fmt: skip
    password = template["POSTGRES_PASSWORD"]
    assert f"scalectl:{password}@postgres:5432/scalectl" in template["SCALECTL_DATABASE_URL"]
    for daemon in daemons:
        for volume in services[daemon]["volumes"]:
            assert (DEPLOY / volume.split(":")[0]).is_file(), volume
    for image in (postgres["image"], services["redis"]["image"]):
        assert re.search(r":\d+\.\d+", image), f"{image}: pin a release"


def test_plotting_is_an_extra_and_unused_packages_are_gone() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert "matplotlib" not in core and "sniffio" not in core
    assert any(d.startswith("matplotlib") for d in project["optional-dependencies"]["plot"])


def test_plot_without_matplotlib_is_a_clear_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import scalectl.cli.simulate_cmd as cmd

    real = cmd.importlib.util.find_spec
    monkeypatch.setattr(cmd.importlib.util, "find_spec", lambda name: None if name == "matplotlib" else real(name))
    examples = ROOT / "examples"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "-f", str(examples / "tiers" / "batch-night.yaml"),
            "-w", str(examples / "workloads" / "batch-night.yaml"),
            "--plot", str(tmp_path / "p.png"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2 and "pip install 'scalectl[plot]'" in result.stderr


def test_the_image_lock_pins_every_runtime_dependency_with_hashes() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["aws"]]
    lock = (DEPLOY / "requirements.lock").read_text()
    pinned = {_name(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==\S+ \\$", lock, re.MULTILINE)}
    missing = {_name(re.split(r"[\[<>=!~; ]", dep, maxsplit=1)[0]) for dep in wanted} - pinned
    assert not missing, f"deploy/requirements.lock lacks {sorted(missing)}: regenerate it (command at its top)"
    blocks = re.split(r"^(?=[A-Za-z0-9_.\-]+==)", lock, flags=re.MULTILINE)[1:]
    assert blocks and all("--hash=sha256:" in block for block in blocks), "every pin carries its hashes"
    assert "--require-hashes -r deploy/requirements.lock" in (DEPLOY / "Containerfile").read_text()


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
