"""The package's layout, read from its source with :mod:`ast` (nothing is imported).

Every import counts, the lazy ones inside functions included: a stage never imports a consumer
of it, no two subpackages import each other (directly or round a cycle), no folder reads as
tests or build output, and only the CLI's renderers (cli/render) print.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "backend_spec"
ROOT = PACKAGE.name

#: What each stage must never import: the stages and tools that consume it. A stage lower in
#: the pipeline (read -> validate -> resolve -> intermediate form -> compile) knows nothing of
#: what reads its output.
CONSUMERS = ("analysis", "check", "cli", "export", "lint", "pt2e", "lower")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "specfile": ("ir", "compiler", *CONSUMERS),
    "names": ("ir", "compiler", *CONSUMERS),
    "ir": ("compiler", *CONSUMERS),
    "compiler": CONSUMERS,
    "lint": ("analysis", "check", "cli", "export"),
    # export of a pt2e Quantizer verifies the spec by quantizing sample models (check's
    # synthesizer), so export sits above check, and check never reads export's writers.
    "export": ("cli", "lint", "lower"),
    "analysis": ("check", "cli", "lint", "lower"),
    "check": ("cli", "lint", "export", "lower"),
    "pt2e": ("cli", "lint", "lower"),
    # lowering quantizes with the pt2e flow and reuses check's zoo and workers
    "lower": ("cli", "lint", "export"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(path: Path) -> set[str]:
    """Every ``backend_spec`` module ``path`` imports (see :func:`_imports_in`)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(source: str, package: str) -> set[str]:
    """Every ``backend_spec`` module ``source`` (a module of ``package``) imports, at any depth
    (inside functions too); ``from package import name`` counts as the submodule when ``name``
    is one."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in _modules() else base)
    return {name for name in found if name == ROOT or name.startswith(f"{ROOT}.")}


def _unit(module: str) -> str | None:
    """The subpackage (or top-level module) a module belongs to; None for the package root,
    the public facade that re-exports every stage."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else None


@cache
def _graph() -> dict[str, dict[str, set[str]]]:
    """unit -> unit it imports -> the modules that do (for messages)."""
    graph: dict[str, dict[str, set[str]]] = {}
    for module, path in _modules().items():
        source = _unit(module)
        if source is None:
            continue
        for target in map(_unit, _imported(path)):
            if target is not None and target != source:
                graph.setdefault(source, {}).setdefault(target, set()).add(module)
    return graph


def _cycle() -> list[str] | None:
    """One import cycle between units, or None."""
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = 1
        path.append(unit)
        for target in sorted(graph.get(unit, {})):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[unit] = 2
        return None

    for unit in sorted(graph):
        if unit not in state and (found := visit(unit)):
            return found
    return None


def test_the_walker_sees_lazy_and_relative_imports() -> None:
    source = """
import os
from backend_spec import codes
from . import loader

def late():
    from backend_spec.lint.runner import lint_path
    if True:
        import backend_spec.check.run
"""
    found = _imports_in(source, f"{ROOT}.compiler")
    assert found == {
        f"{ROOT}.codes",
        f"{ROOT}.compiler.loader",
        f"{ROOT}.lint.runner",
        f"{ROOT}.check.run",
    }


def test_no_import_cycle_between_subpackages() -> None:
    cycle = _cycle()
    if cycle:
        steps = [
            f"{a} -> {b} ({', '.join(sorted(_graph()[a][b]))})"
            for a, b in zip(cycle, cycle[1:], strict=False)
        ]
        pytest.fail("import cycle:\n  " + "\n  ".join(steps))


@pytest.mark.parametrize("stage", sorted(FORBIDDEN))
def test_a_stage_never_imports_its_consumers(stage: str) -> None:
    imports = _graph().get(stage, {})
    wrong = {target: sorted(imports[target]) for target in FORBIDDEN[stage] if target in imports}
    assert not wrong, f"{stage} imports its consumers: {wrong}"


def test_forbidden_table_names_real_subpackages() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert set(FORBIDDEN) | {t for ts in FORBIDDEN.values() for t in ts} <= packages


def test_no_folder_or_module_reads_as_tests_or_build_output() -> None:
    # pytest collects test_*.py / *_test.py and tools skip build/; spec/ reads as a test folder.
    folders = [p for p in PACKAGE.rglob("*") if p.is_dir() and p.name in ("spec", "build")]
    tests = [
        p for p in PACKAGE.rglob("*.py") if p.stem.startswith("test_") or p.stem.endswith("_test")
    ]
    assert not folders and not tests, [str(p.relative_to(PACKAGE)) for p in (*folders, *tests)]


def _prints(source: str) -> list[int]:
    """Lines that write to the terminal: ``print()``, ``typer.echo``, a console's ``print``,
    ``sys.stdout``/``sys.stderr`` writes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print":
            found.append(node.lineno)
        elif isinstance(func, ast.Attribute) and func.attr in ("echo", "print", "secho"):
            found.append(node.lineno)
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "write"
            and isinstance(func.value, ast.Attribute)
            and func.value.attr in ("stdout", "stderr")
        ):
            found.append(node.lineno)
    return found


def test_the_print_finder_finds_each_way_of_printing() -> None:
    source = "print(1)\ntyper.echo(2)\nconsole.print(3)\nsys.stderr.write('4')\nlog.info(5)\n"
    assert _prints(source) == [1, 2, 3, 4]


def test_only_the_cli_renderers_print() -> None:
    render = PACKAGE / "cli" / "render"
    printing = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if render not in path.parents
        for line in _prints(path.read_text(encoding="utf-8"))
    ]
    assert not printing, f"printing outside backend_spec/cli/render: {printing}"


@pytest.mark.parametrize("name", ["load", "loads", "dump", "qconfig_mapping", "quantizer"])
def test_the_public_api_has_precise_return_types(name: str) -> None:
    import inspect
    import typing

    import backend_spec

    function = getattr(backend_spec, name)
    hints = typing.get_type_hints(function, vars(inspect.getmodule(function)) | _type_names())
    assert hints["return"] is not typing.Any, f"backend_spec.{name} returns Any"


def _type_names() -> dict[str, object]:
    """Names the API annotates with only under TYPE_CHECKING (the runtime needs torchao)."""
    from backend_spec.pt2e.rules import Report
    from backend_spec.pt2e.runtime import TableQuantizer

    return {"Report": Report, "TableQuantizer": TableQuantizer}


def test_the_architecture_page_places_every_subpackage_and_top_level_module() -> None:
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    units = {p.parent.name + "/" for p in PACKAGE.glob("*/__init__.py")}
    units |= {p.name for p in PACKAGE.glob("*.py") if p.name not in ("__main__.py",)}
    missing = sorted(u for u in units if f"`{u}" not in page and f" {u}" not in page)
    assert not missing, f"docs/architecture.md does not say where these live: {missing}"
