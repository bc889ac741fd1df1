"""One import root: the distribution installs ``scalectl`` and nothing else at the top of site-packages.

Thirteen generic top-level packages (``controller``, ``policies``, ``cli``, ...) once went into site-packages,
where they overwrote or were shadowed by other distributions of the same names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OLD_ROOTS = {
    "cli", "clocks", "controller", "domain", "migrations", "policies", "providers",
    "serving", "simulator", "sizing", "sources", "tiers", "vllm_standin",
}  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project installed as a user installs it (a wheel built from this tree), into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         str(ROOT)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return target


def _run(site: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The installed copy comes first on the path; the venv's site-packages still gives the dependencies.
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_the_wheel_installs_one_top_level_package(installed: Path) -> None:
    packages = {p.name for p in installed.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in installed.glob("*.py")}
    assert packages == {"scalectl"}
    assert modules == set()
    for name in ("controller", "providers", "policies", "migrations"):  # the project's top folders, as packages
        assert (installed / "scalectl" / name / "__init__.py").is_file()
    assert (installed / "scalectl" / "migrations" / "script.py.mako").is_file()
    assert (installed / "scalectl" / "controller" / "embedded" / "tiers.yaml").is_file()


def test_scalectl_imports_and_the_old_roots_do_not(installed: Path, tmp_path: Path) -> None:
    code = "import scalectl.controller.app, scalectl.cli.main, scalectl.policies; print(scalectl.policies.__file__)"
    ok = _run(installed, code, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(str(installed)), ok.stdout  # the installed copy, not this source tree
    for name in sorted(OLD_ROOTS):
        gone = _run(installed, f"import {name}", tmp_path)
        assert gone.returncode != 0, f"`import {name}` works in an installed environment"
        assert "ModuleNotFoundError" in gone.stderr


def test_the_console_script_points_into_the_namespace(installed: Path, tmp_path: Path) -> None:
    out = _run(installed, "from scalectl.cli.main import main; import sys; sys.argv=['scalectl','--version']; main()",
               tmp_path)  # fmt: skip
    assert out.stdout.startswith("scalectl "), out.stderr


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_file_in_the_repository_imports_an_old_root() -> None:
    """ruff's banned-api holds this for the package; tests and benchmarks (which ruff lets use time.time) too."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {".venv", "scalectl", "build"} or "site-packages" in rel.parts:
            continue  # scalectl/ links to the top folders, which are scanned as themselves
        bad = _top_level_imports(path) & OLD_ROOTS
        if bad:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert offenders == []
