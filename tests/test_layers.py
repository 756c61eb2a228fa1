"""Imports point only down the layers (docs/guide.md, "Layers"): a module may import its own
layer and the ones below, never one above."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "rlfw"

# Bottom to top. A module belongs to the first entry that is its dotted path or a prefix.
LAYERS = [
    ("utils", ["rlfw.utils"]),
    ("foundation", ["rlfw.envs", "rlfw.buffers", "rlfw.models", "rlfw.logging", "rlfw.runfolder"]),
    ("agents", ["rlfw.agents"]),
    ("samplers", ["rlfw.samplers", "rlfw.testing"]),
    ("algos", ["rlfw.algos"]),
    ("runners", ["rlfw.runners"]),
    ("registry", ["rlfw.registry"]),
    ("launch", ["rlfw.launch"]),
    ("bench", ["rlfw.bench"]),
    ("top", ["rlfw.cli", "rlfw.__main__", "rlfw"]),  # the package's facade re-exports all
]


def layer_of(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (p != "rlfw" and module.startswith(p + ".")) for p in prefixes):
            return rank
    raise AssertionError(f"module {module} is in no layer; add it to LAYERS and the guide")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rlfw_imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every rlfw import, at any depth of the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        out += [(node.lineno, n) for n in names if n == "rlfw" or n.startswith("rlfw.")]
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


ROOT_MODULES = {"__init__.py", "__main__.py", "cli.py", "registry.py"}


def test_the_package_root_holds_only_the_entry_points():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ROOT_MODULES)
    assert not loose, f"modules at the package root: {loose}; each belongs in a layer's package"


def test_every_module_has_a_layer():
    for path in MODULES:
        layer_of(module_name(path))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_only_down(path):
    source = module_name(path)
    here = layer_of(source)
    up = [
        f"{source} ({LAYERS[here][0]}) imports {target} ({LAYERS[layer_of(target)][0]}) "
        f"at line {line}"
        for line, target in rlfw_imports(path)
        if layer_of(target) > here
    ]
    assert not up, "imports that point up:\n" + "\n".join(up)


def test_the_check_finds_an_import_that_points_up(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from rlfw.launch.config import RunConfig\n")
    assert [layer_of(t) for _, t in rlfw_imports(bad)] == [layer_of("rlfw.launch")]
    assert layer_of("rlfw.launch.config") > layer_of("rlfw.runners.base")


def module_imports(path: Path, known: set[str]) -> set[str]:
    """The rlfw modules ``path`` imports, at any depth (``from pkg import sub`` counts as
    importing ``pkg.sub`` when that is a module)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in known}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each a cycle's
    members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    known = {module_name(p) for p in MODULES}
    graph = {module_name(p): module_imports(p, known) - {module_name(p)} for p in MODULES}
    cycles = import_cycles(graph)
    assert not cycles, "modules that import each other (at any depth, lazily too):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_check_finds_a_cycle():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
