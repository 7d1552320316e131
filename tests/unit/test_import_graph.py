"""No import cycle among agentstream's modules, deferred imports included.

The graph is built from every ``import``/``from`` statement that runs: at module level and inside
functions alike, so a cycle hidden behind a function-level import counts. Imports under ``if
TYPE_CHECKING:`` are left out: they never run, and a type may name a module above its user (as
import-linter's ``exclude_type_checking_imports`` leaves them out of the layers). ``from pkg import name`` counts as an edge to ``pkg.name`` when that is a module,
else to ``pkg`` (its ``__init__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "agentstream"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def build_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                for alias in node.names:
                    full = f"{prefix}.{alias.name}"
                    targets.append(full if full in files else prefix)
            for t in targets:
                while t and t not in files:
                    t = t.rpartition(".")[0]
                if t and t != mod and t.startswith("agentstream"):
                    graph[mod].add(t)
    # A module imports its package's __init__ too; that edge is Python's, not the code's choice.
    return graph


def _type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` but those under ``if TYPE_CHECKING:`` (their ``else:``
    branch runs, and counts)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.stmt) and _type_checking(node):
            pending.extend(node.orelse)  # type: ignore[attr-defined]
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# Must never be part of a cycle: the foundation and the runtime pieces issue 13 restructured.
ACYCLIC = [
    "agentstream.exceptions",
    "agentstream.runtime",
    "agentstream.lifecycle",
    "agentstream.events",
    "agentstream.transport.base",
    "agentstream.tables.cache",
    "agentstream.tables.partition",
    "agentstream.worker.commit",
    "agentstream.worker.eos",
    "agentstream.worker.errors",
    "agentstream.worker.fetcher",
    "agentstream.worker.partition_group",
    "agentstream.worker.assignor",
]


def test_restructured_modules_are_in_no_cycle() -> None:
    in_cycles = set().union(*map(set, cycles(build_graph())))
    assert not in_cycles & set(ACYCLIC), sorted(in_cycles & set(ACYCLIC))


def test_runtime_module_is_at_the_bottom() -> None:
    graph = build_graph()
    assert graph["agentstream.runtime"] <= {"agentstream.exceptions", "agentstream.transport.base", "agentstream.clock"}
    assert graph["agentstream.clock"] == set()  # the clock imports nothing of agentstream


def test_no_import_cycles() -> None:
    """Upper layers reach lower ones by import; lower ones use the Protocols of agentstream.types or
    an entry point the upper module installs (``upper`` in streams, tables.table, agents.agent, app
    and worker.worker). The layering itself is checked by import-linter (pyproject.toml)."""
    found = cycles(build_graph())
    assert not found, "import cycles (deferred imports included):\n" + "\n".join(" <-> ".join(c) for c in found)


if __name__ == "__main__":
    for c in cycles(build_graph()):
        print(len(c), c)


def test_methods_implemented_in_other_modules_reach_them_by_import_not_by_registry() -> None:
    """Table.tumbling builds its WindowedTable and Table.join its JoinedTable by runtime imports
    (windowed.py and joined.py name Table only for typing), Stream.join calls the joins package
    below it, Agent.test_context builds its harness from its own package and App.main runs the
    installed ``agentstream`` command: no module installs functions on a class below it."""
    import agentstream
    from agentstream import agents, app, streams
    from agentstream.agents.test_context import AgentTestContext
    from agentstream.cli import main
    from agentstream.tables import table
    from agentstream.tables.joined import JoinedTable
    from agentstream.tables.windowed import WindowedTable

    for module in (app, streams, table, agents.agent):
        assert not [n for n in vars(module) if n in ("upper", "_Upper") or n.endswith("entry_points")], module
    demo = agentstream.App("entry-points", broker="memory://")
    counts, other = demo.Table("t", default=int), demo.Table("u", default=int)
    assert isinstance(counts.tumbling(60), WindowedTable)
    assert isinstance(other.join(demo.Table("v")), JoinedTable)
    topic = demo.topic("t")

    @demo.agent(topic)
    async def agent(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for _ in stream:
            pass

    assert isinstance(agent.test_context(), AgentTestContext)
    assert app.command_line() is main
