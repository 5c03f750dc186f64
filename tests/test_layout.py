"""The layout is the pipeline (``../shared/ARCHITECTURE.md``): read every import of the project
(module level and inside functions, with ``ast``) and fail on a cycle between modules or on an
import against the direction ``costmodel -> hwgen -> sim_tests -> accelgen``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("costmodel", "hwgen", "sim_tests", "accelgen")
#: What each package may import of the others (the layers below it).
ALLOWED = {
    "costmodel": set(),
    "hwgen": {"costmodel"},
    "sim_tests": {"costmodel", "hwgen"},
    "accelgen": {"costmodel", "hwgen", "sim_tests"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules that module ``name`` imports."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:   # `import costmodel.dse.plan` -> that module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_graph_was_read() -> None:
    assert len(MODULES) > 40
    assert "costmodel.hwgen_preset.structure" in GRAPH["hwgen.accelerator"]
    assert "sim_tests.runner" in GRAPH["accelgen.hwcommands"]


def test_no_module_imports_against_the_pipeline() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        top = name.split(".")[0]
        is_test = name.startswith("sim_tests.test_")
        for target in targets:
            other = target.split(".")[0]
            if other != top and other not in ALLOWED[top] and not (is_test and other == "accelgen"):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components: any with more than one module is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.startswith("sim_tests.test_")))
def test_modules_are_small_enough_to_read(name: str) -> None:
    lines = MODULES[name].read_text().count("\n")
    assert lines <= 560, f"{name} has {lines} lines; split it along its seams"
