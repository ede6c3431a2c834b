"""The package's architecture, checked: the import graph of ``ucse/`` is acyclic and only points downward.

The graph is built with ``ast`` from every ``import`` in every module (module level and inside functions,
``TYPE_CHECKING`` blocks included: an arrow is an arrow), so a lazy import cannot hide an upward one.
``LAYERS`` is the one place the allowed order is written: a unit may import its own modules and any unit
of a lower layer, nothing else.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ucse

ROOT = Path(ucse.__file__).resolve().parent

LAYERS: list[set[str]] = [
    {"json_read", "blank_text", "hub"},  # JSON read from disk; a blank text; can the hub be reached
    {"atomic", "interrupt", "config", "version"},  # foundations: file writes, signals, config, version
    {"backbone", "data"},  # the frozen model and its states; task data
    {"heads", "losses"},  # what is trained on the states
    {"training"},  # fitting heads (Lightning, or in memory)
    {"core"},  # the saved model: texts -> (mean, var, logits); Gaussian embeddings
    {"uncertainty"},  # the profile fitted on a trained head
    {"pipeline", "summary"},  # data -> train -> profile -> run folder; the lines a run prints
    {"inference", "evaluation"},  # the classifier; metrics, MTEB
    {"uec", "export"},  # ensembles over trained members; exporting embeddings
    {"ucse"},  # the package facade: `import ucse; ucse.train(...)`, `ucse.UcseClassifier`
    {"cli"},  # the commands
    {"__main__"},  # `python -m ucse`
]
"""Units (the first folder or module under ``ucse/``) from the bottom layer up."""


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ucse"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("ucse", *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the ucse modules it imports (``from pkg import sub`` counts as ``pkg.sub``)."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in modules else base)
            for t in targets:
                while t and t not in modules:  # `import ucse.a.b` of a symbol path: its module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def _rank() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a unit to one of its own layer or above (``a -> b`` strings, sorted)."""
    rank = _rank()
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _unit(a) != _unit(b) and rank[_unit(b)] >= rank[_unit(a)]
    )


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, ..., a]``), or ``None`` when the graph is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done

    def visit(node: str, stack: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*stack, nxt])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return None


def test_every_unit_has_a_layer():
    units = {_unit(m) for m in _modules()}
    assert units - set(_rank()) == set(), "give each new package a layer in LAYERS"


def test_imports_point_only_downward():
    bad = violations(import_graph())
    assert bad == [], "imports that run up or sideways:\n" + "\n".join(bad)


def test_module_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_checks_catch_what_they_look_for():
    """Not vacuous: an upward, a sideways and a circular import are each reported."""
    assert violations({"ucse.backbone.x": {"ucse.cli.main"}}) == ["ucse.backbone.x -> ucse.cli.main"]
    assert violations({"ucse.inference.x": {"ucse.evaluation.y"}}) != []
    assert violations({"ucse.cli.main": {"ucse.backbone.x"}, "ucse.heads.a": {"ucse.heads.b"}}) == []
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_lazy_and_from_imports():
    graph = import_graph()
    assert "ucse.pipeline" in graph["ucse.cli.train"]  # module level
    assert "ucse.pipeline" in graph["ucse.inference.classifier"]  # inside a method
    assert "ucse.atomic" in graph["ucse.heads.io"]  # `from ucse import atomic`
