"""Every import-linter contract in pyproject.toml is kept, and an import that breaks it is caught.

A contract that cannot fail guards nothing: a misspelt external package, a layer listed in the wrong
place or an `ignore_imports` that is too wide keeps `lint-imports` green whatever the code imports.
So for each declared contract this builds the real import graph (once), checks the contract is kept,
then adds the imports the contract exists to forbid, one at a time on a copy of the graph, and checks
each one breaks it. The contracts are read from pyproject.toml and checked by import-linter's own
classes, so a new contract is covered without editing this file; a contract type this file does not
know how to break fails the test instead of passing unchecked.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import configuration
from importlinter.application import use_cases
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract
from importlinter.domain.helpers import module_expressions_to_modules

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

Edge = tuple[str, str]  # (importer, imported)


def _read_options() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The session and contract options exactly as `lint-imports` reads them from pyproject.toml."""
    configuration.configure()  # import-linter's readers need its settings, as its CLI sets them up
    options = use_cases.read_user_options(config_filename=str(PYPROJECT))
    return options.session_options, options.contracts_options


SESSION_OPTIONS, CONTRACT_OPTIONS = _read_options()


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # The graph must be this checkout's code, not another installed copy of the package.
    roots = SESSION_OPTIONS["root_packages"]
    for root in roots:
        spec = importlib.util.find_spec(root)
        assert spec is not None and spec.origin is not None, f"{root} is not importable: run from {ROOT}"
        assert Path(spec.origin).resolve().is_relative_to(ROOT), (
            f"{root} resolves to {spec.origin}, not this checkout ({ROOT}): put {ROOT} first on PYTHONPATH"
        )
    return grimp.build_graph(
        *roots,
        include_external_packages=SESSION_OPTIONS.get("include_external_packages") in ("True", "true"),
        exclude_type_checking_imports=SESSION_OPTIONS.get("exclude_type_checking_imports") in ("True", "true"),
        cache_dir=None,
    )


def _an_importer(graph: grimp.ImportGraph, package: str) -> str:
    """A module inside `package` (its first descendant), so the edge also proves the whole package is covered."""
    descendants = sorted(graph.find_descendants(package)) if package in graph.modules else []
    return descendants[0] if descendants else package


def _layers_violations(contract: Contract, graph: grimp.ImportGraph) -> Iterator[Edge]:
    """Every lower-layer module importing every higher one; every independent sibling importing another."""
    assert isinstance(contract, LayersContract)
    parsed: Any = contract  # import-linter sets the parsed options as instance attributes
    containers: list[str | None] = [
        m.name for m in sorted(module_expressions_to_modules(graph, parsed.containers or ()), key=str)
    ]
    for container in containers or [None]:

        def name(tail: Any, container: str | None = container) -> str:
            return f"{container}.{tail.name}" if container else tail.name

        layers = [
            [name(tail) for tail in sorted(layer.module_tails, key=lambda t: t.name) if name(tail) in graph.modules]
            for layer in parsed.layers
        ]
        for higher_index, higher in enumerate(layers):
            for lower in layers[higher_index + 1 :]:
                for low, high in itertools.product(lower, higher):
                    yield _an_importer(graph, low), high
        for layer, names in zip(parsed.layers, layers, strict=True):
            if layer.is_independent:
                for a, b in itertools.permutations(names, 2):
                    yield _an_importer(graph, a), b


def _forbidden_violations(contract: Contract, graph: grimp.ImportGraph) -> Iterator[Edge]:
    """Every source module importing every forbidden module (pairs the contract itself skips excepted)."""
    assert isinstance(contract, ForbiddenContract)
    parsed: Any = contract
    sources = sorted(m.name for m in module_expressions_to_modules(graph, parsed.source_modules))
    forbidden = sorted(m.name for m in module_expressions_to_modules(graph, parsed.forbidden_modules))
    as_packages = str(parsed.as_packages).lower() == "true"
    for source, target in itertools.product(sources, forbidden):
        overlap = source == target or (
            as_packages and (source.startswith(target + ".") or target.startswith(source + "."))
        )
        if not overlap:
            yield (_an_importer(graph, source) if as_packages else source), target


def _independence_violations(contract: Contract, graph: grimp.ImportGraph) -> Iterator[Edge]:
    """Every listed module importing every other one."""
    assert isinstance(contract, IndependenceContract)
    parsed: Any = contract
    modules = sorted(m.name for m in module_expressions_to_modules(graph, parsed.modules))
    for a, b in itertools.permutations(modules, 2):
        yield _an_importer(graph, a), b


# contract type in pyproject.toml -> (import-linter's class, the imports that must break it)
HANDLED: dict[str, tuple[type[Contract], Callable[[Contract, grimp.ImportGraph], Iterator[Edge]]]] = {
    "layers": (LayersContract, _layers_violations),
    "forbidden": (ForbiddenContract, _forbidden_violations),
    "independence": (IndependenceContract, _independence_violations),
}


def _contract(options: dict[str, Any]) -> tuple[Contract, Callable[[Contract, grimp.ImportGraph], Iterator[Edge]]]:
    kind = options["type"]
    if kind not in HANDLED:
        pytest.fail(
            f"pyproject.toml [[tool.importlinter.contracts]] {options['name']!r} has type {kind!r}, which "
            f"{Path(__file__).name} cannot break yet: add it to HANDLED with the imports that must break it"
        )
    contract_class, violations = HANDLED[kind]
    return contract_class(name=options["name"], session_options=SESSION_OPTIONS, contract_options=options), violations


def _is_kept(contract: Contract, graph: grimp.ImportGraph) -> bool:
    # A check may remove ignored imports from the graph it is given (lint-imports also passes a copy).
    return contract.check(copy.deepcopy(graph), verbose=False).kept


def _broken_by(contract: Contract, graph: grimp.ImportGraph, edges: list[Edge]) -> list[Edge]:
    """The edges that, each added alone to a copy of the graph, break the contract."""
    broken = []
    for importer, imported in edges:
        violated = copy.deepcopy(graph)
        violated.add_import(importer=importer, imported=imported)
        if not contract.check(violated, verbose=False).kept:
            broken.append((importer, imported))
    return broken


def test_pyproject_declares_the_contracts() -> None:
    assert len(CONTRACT_OPTIONS) >= 10, f"expected the project's 10+ contracts in {PYPROJECT}"


@pytest.mark.parametrize("options", CONTRACT_OPTIONS, ids=[c["name"][:60] for c in CONTRACT_OPTIONS])
def test_contract_is_kept_and_breaks_on_a_violating_import(options: dict[str, Any], graph: grimp.ImportGraph) -> None:
    contract, violations = _contract(options)
    assert _is_kept(contract, graph), f"{options['name']!r} is broken on this checkout: run lint-imports"

    edges = list(violations(contract, graph))
    assert edges, f"{options['name']!r} names no modules in the graph, so no import can break it"
    broken = _broken_by(contract, graph, edges)
    missed = [edge for edge in edges if edge not in broken]
    assert not missed, f"{options['name']!r} stays kept when these imports are added: {missed}"
    assert _is_kept(contract, graph), "adding imports to a copy must leave the shared graph untouched"


FORBIDDEN = [c for c in CONTRACT_OPTIONS if c["type"] == "forbidden"]


def _installed(name: str) -> bool:
    """A module Python can import. One already imported counts as it is: another test may have put a module
    without a spec in ``sys.modules`` (a stand-in for a broker client), where ``find_spec`` raises."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@pytest.mark.parametrize("options", FORBIDDEN, ids=[c["name"][:60] for c in FORBIDDEN])
def test_external_forbidden_modules_are_real_packages(options: dict[str, Any]) -> None:
    # A misspelt external name ("sqlalchmey") keeps the contract kept forever and is also broken by an
    # added import of that very name, so the check above cannot see it: the name must be importable.
    roots = tuple(SESSION_OPTIONS["root_packages"])
    external = [m for m in options["forbidden_modules"] if m.split(".")[0] not in roots]
    unknown = [m for m in external if not _installed(m)]
    assert not unknown, f"{options['name']!r} forbids {unknown}, which no installed package provides (a typo?)"


def test_independence_handler_breaks_an_independence_contract(graph: grimp.ImportGraph) -> None:
    # No pyproject contract is of this type yet; this keeps its handler honest for the day one is.
    options: dict[str, Any] = {"name": "clocks and migrations are independent", "type": "independence"}
    options["modules"] = ["scalectl.clocks", "scalectl.migrations"]
    contract, violations = _contract(options)
    assert _is_kept(contract, graph)
    edges = list(violations(contract, graph))
    assert len(edges) == 2
    assert _broken_by(contract, graph, edges) == edges


def test_an_unhandled_contract_type_fails_loudly() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"'protected'.*add it to HANDLED"):
        _contract({"name": "x", "type": "protected"})


def test_an_import_the_contract_allows_does_not_break_it(graph: grimp.ImportGraph) -> None:
    # The check must tell kept from broken, not report broken for any added edge: a higher layer
    # importing a lower one is allowed by the layers contract.
    options = next(c for c in CONTRACT_OPTIONS if c["type"] == "layers")
    contract, _ = _contract(options)
    parsed: Any = contract
    layers = parsed.layers
    top = sorted(t.name for t in layers[0].module_tails)[0]
    bottom = sorted(t.name for t in layers[-1].module_tails)[0]
    assert _broken_by(contract, graph, [(_an_importer(graph, top), bottom)]) == []
