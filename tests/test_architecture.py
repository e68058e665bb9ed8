"""The package's layers: imports flow one way, and no module imports itself back in a cycle.

core → data → nn → methods → experiments → analysis → viz → notebooks / cli
(docs/ARCHITECTURE.md). Every ``import`` statement counts, including those inside functions:
a lazy upward import is still an upward dependency.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pace_nb

PKG = Path(pace_nb.__file__).resolve().parent
LAYERS = {"core": 0, "data": 1, "nn": 2, "methods": 3, "experiments": 4, "flower": 4, "analysis": 5, "viz": 6,
          "notebooks": 7, "notebook_setup": 7, "gallery": 7, "testing": 7, "cli": 8}
EXEMPT = {"pace_nb", "pace_nb.__main__"}  # the front door


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run, so never part of a cycle)."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return guarded


def imports(path: Path, top_level_only: bool = False, run_time_only: bool = False) -> set[str]:
    """Absolute pace_nb modules imported by ``path`` (relative imports resolved); ``run_time_only``
    leaves out the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    nodes = tree.body if top_level_only else ast.walk(tree)
    if run_time_only:
        skip = _type_checking_only(tree)
        nodes = [n for n in nodes if id(n) not in skip]
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "pace_nb"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "pace_nb":
                continue
            out.add(mod)
            for a in node.names:  # ``from pace_nb.methods import local`` imports a submodule
                if (PKG.parent / Path(*f"{mod}.{a.name}".split("."))).with_suffix(".py").exists():
                    out.add(f"{mod}.{a.name}")
    return out


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


SOURCES = sorted(p for p in PKG.rglob("*.py") if "paper_values" not in p.parts or p.name == "__init__.py")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: module_name(p))
def test_imports_flow_one_way(path):
    me = module_name(path)
    if me in EXEMPT:
        return
    mine = layer(me)
    assert mine is not None, f"{me} is in no layer; add its subpackage to LAYERS and docs/ARCHITECTURE.md"
    upward = sorted(m for m in imports(path) if m not in EXEMPT and (layer(m) or 0) > mine)
    assert not upward, f"{me} (layer {mine}) imports upward: {upward}"


#: Import cycles known today, each as the set of its modules. contract <-> registry is being rewritten
#: (the one method contract, issue 40); any other cycle, or a longer one through these, fails.
KNOWN_CYCLES = [{"pace_nb.methods.contract", "pace_nb.methods.registry"}]


def import_graph(sources) -> dict[str, set[str]]:
    """module -> the pace_nb modules it imports when it runs (top level and inside functions; not
    under ``if TYPE_CHECKING:``), plus its parent packages (imported first)."""
    graph = {module_name(p): {m for m in imports(p, run_time_only=True) if m != module_name(p)} for p in sources}
    for mod in list(graph):
        parent = mod.rpartition(".")[0]
        while parent and parent != "pace_nb":
            graph.setdefault(mod, set()).add(parent)
            parent = parent.rpartition(".")[0]
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets (a package importing its own submodules is none)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if n.startswith(m + "."):
                continue
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n in graph and not state.get(n):
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            visit(m)
    return cycles


def test_no_import_cycles():
    new = [c for c in import_cycles(import_graph(SOURCES)) if set(c) not in KNOWN_CYCLES]
    assert not new, "import cycle(s): " + "; ".join(" -> ".join(c) for c in new)


def test_the_checker_catches_a_cycle_through_a_function_level_import():
    a, b = PKG / "data" / "_cycle_probe_a.py", PKG / "data" / "_cycle_probe_b.py"
    a.write_text("from pace_nb.data import _cycle_probe_b\n")
    b.write_text("def f():\n    from pace_nb.data import _cycle_probe_a\n")
    try:
        cycles = import_cycles(import_graph([a, b]))
        assert {"pace_nb.data._cycle_probe_a", "pace_nb.data._cycle_probe_b"} in [set(c) for c in cycles]
        b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pace_nb.data import _cycle_probe_a\n")
        assert not import_cycles(import_graph([a, b]))  # a type-only import never runs
    finally:
        a.unlink()
        b.unlink()


def test_the_checker_catches_an_upward_import(tmp_path):
    fake = PKG / "core" / "_upward_probe.py"
    fake.write_text("def f():\n    from pace_nb.viz import pace\n")
    try:
        assert "pace_nb.viz.pace" in imports(fake)
        assert layer("pace_nb.viz.pace") > layer(module_name(fake))
    finally:
        fake.unlink()


def test_public_api():
    for name in pace_nb.__all__:
        assert getattr(pace_nb, name) is not None


def test_tests_are_laid_out_like_the_package():
    """tests/<subpackage>/ holds the tests of pace_nb/<subpackage>/; the top level keeps the
    whole-project tests (architecture, notebooks, packaging, the newcomer's walk, the browser) and
    ``fixtures/``, the small files some tests check against."""
    tests = Path(__file__).resolve().parent
    folders = sorted(p.name for p in tests.iterdir()
                     if p.is_dir() and not p.name.startswith((".", "__")) and p.name != "fixtures")
    assert folders and all((PKG / name / "__init__.py").is_file() for name in folders), folders
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test modules share a name"
