"""The import graph of albert_edge + converters: cycles, and the largest modules and functions.

Why a script: issue #15 asks for the layering before/after a refactor as measured
numbers, not impressions. Every import counts, function-level (lazy) ones included, and
so do type-only ones (under ``if TYPE_CHECKING:``; issue #53): a type imported from above
its user is a circle in the design even when it never runs, and the rule "a type lives
below its users" is only kept if it is checked. A module importing its own package's
``__init__`` (``from albert_edge import __version__``) counts too, and so does a
package's ``__init__`` importing its own submodules (alone, that makes no cycle).

The cycle check covers ``albert_edge``, ``converters`` and ``benchmarks`` (the scripts
import the library and each other); the counts and the largest modules cover the library.

    python tools/import_graph.py                # this checkout
    python tools/import_graph.py --root DIR --label before --out benchmarks/results
    python tools/import_graph.py --check         # CI: exit 1 on any module cycle (CHECKED)

Writes ``import_graph_<label>.json`` and ``.md`` under ``--out`` (default: print only).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("albert_edge", "converters")
CHECKED = (*PACKAGES, "benchmarks")  # --check: no cycle among these


def _sccs(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def import_edges(
    root: Path, packages: tuple[str, ...] = PACKAGES, *, type_only: bool = True
) -> dict[str, set[str]]:
    """Module → modules it imports (within ``packages``), through grimp; ``type_only``
    counts imports under ``if TYPE_CHECKING:`` too (see the module docstring)."""
    import grimp

    sys.path.insert(0, str(root))
    graph = grimp.build_graph(
        *packages, cache_dir=None, exclude_type_checking_imports=not type_only
    )
    # Every arrow counts, a package's __init__ importing its own submodules included: that
    # alone makes no cycle, but a submodule importing its package back (the package face,
    # ``from albert_edge import __version__``) then closes one, as it does when run.
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def largest(root: Path, n: int = 5) -> dict[str, list[dict[str, Any]]]:
    """The ``n`` largest modules and functions (lines) of the packages."""
    modules, functions = [], []
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            text = f.read_text()
            rel = str(f.relative_to(root))
            modules.append({"module": rel, "lines": len(text.splitlines())})
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    functions.append({"function": f"{rel}:{node.name}", "lines": lines})
    key = "lines"
    return {
        "modules": sorted(modules, key=lambda d: -d[key])[:n],
        "functions": sorted(functions, key=lambda d: -d[key])[:n],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--check", action="store_true", help="exit 1 if any module cycle exists")
    a = ap.parse_args(argv)
    if a.check:
        cycles = _sccs(import_edges(a.root.resolve(), CHECKED))
        for c in cycles:
            print("import cycle: " + " <-> ".join(c), file=sys.stderr)
        return 1 if cycles else 0
    edges = import_edges(a.root.resolve())
    cycles = _sccs(edges)
    result = {
        "label": a.label,
        "modules": len(edges),
        "imports": sum(len(v) for v in edges.values()),
        "cycles": cycles,
        "largest": largest(a.root),
    }
    md = [f"# Import graph ({a.label})", ""]
    md.append(f"{result['modules']} modules, {result['imports']} internal imports.")
    md.append("")
    md.append(f"## Cycles (strongly connected components): {len(cycles)}")
    md += [f"- {' <-> '.join(c)}" for c in cycles] or ["- none"]
    for kind in ("modules", "functions"):
        md += ["", f"## Five largest {kind}", "", "| lines | name |", "|---:|---|"]
        md += [
            f"| {d['lines']} | {d.get('module') or d.get('function')} |"
            for d in result["largest"][kind]
        ]
    text = "\n".join(md) + "\n"
    print(text)
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"import_graph_{a.label}.json").write_text(json.dumps(result, indent=2) + "\n")
        (a.out / f"import_graph_{a.label}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
