"""How readable the codebase is, as numbers, before and after a change (issue 25).

Why a script: "a house a newcomer can read" is a claim about the code, so it is measured
on the code: the same function runs on this checkout and on an old commit, and the
Markdown puts the two side by side.

    python tools/codebase_metrics.py                     # this working tree only
    python tools/codebase_metrics.py --before fb1525b    # and that commit, side by side

Writes ``codebase_metrics.json`` and ``.md`` under ``--out`` (default
``benchmarks/results``). The old commit is unpacked with ``git archive`` into a temporary
directory (the repository's index, HEAD and worktrees are not touched), and every tree is
measured in its own process, so grimp and import-linter see only that tree's packages.

What is counted, and how:

- **modules, lines**: ``*.py`` files under ``albert_edge/`` and ``converters/``, and their
  physical lines (blank and comment lines included).
- **import cycles**: strongly connected components of the module import graph
  (``tools/import_graph.py``'s grimp graph: function-level and type-only (TYPE_CHECKING)
  imports count, issue 53).
- **imports against the layering**: ``lint-imports`` on the tree, once with the tree's own
  contract and once with this checkout's contract; the number of broken contracts and of
  offending import lines it lists.
- **functions over 100 lines**: every ``def`` (methods and nested functions included)
  whose span, decorators excluded, exceeds 100 lines; listed. Beside it the count over
  :data:`LONGISH` lines and the library files over :data:`LONG_FILE` lines (issue 53: none
  over 100, at most 10 over 80, no file over 800).
- **private names from another package**: ``from albert_edge.X import _y`` in a library
  module whose package (``albert_edge.<first part>``) is not X's; an alias
  (``import f as _f``) imports a public name and is not counted.
- **levers importing verify**: modules of the lever packages (:data:`LEVERS`) and of
  ``benchmarks/`` that import ``albert_edge.verify`` (issue 53: none; a call through the
  package's public face, ``albert_edge.verify(...)``, is not an import of the module).
- **places each graph fact is computed**: for each fact, the definitions that compute it,
  found by name in the AST (the patterns are in :data:`FACTS`); a fact computed in one
  place has exactly one entry. A definition whose whole body returns a call to another
  definition of the same fact (a format's adapter: ``tflite.flatbuffer.duplicate_groups``
  handing its buffers to ``albert_edge.duplicates.duplicate_groups``) computes nothing
  itself and is not counted.
- **benchmarks**: scripts and lines under ``benchmarks/`` (the frozen ``studies/`` apart),
  imports of ``_private`` names from outside the package (a script importing the
  package's own ``benchmarks._setup`` is not reaching into a library), and ``sys.path``
  patches; and the share of the whole
  ``benchmarks/`` folder (``studies/`` and ``__init__.py`` files included) in the
  repository's Python lines outside ``tests/`` (issue 53: at most 15 %; virtual
  environments, ``.git`` and ``_work`` caches are not counted).
- **IR⇄proto crossings**: whole-model conversions between onnx-ir and protobuf during one
  ``convert --precision int8-dynamic`` of the embedded model (:func:`ir_proto_crossings`),
  each with the albert-edge function that made it; "between" leaves out the two ends every
  convert has (the exporter's protobuf read in first, the file written last).
- **README**: lines and characters.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("albert_edge", "converters")
LONG = 100
LONGISH = 80
LONG_FILE = 800
LEVERS = ("depth", "mixed", "vocab", "early_exit", "optimize", "bench", "learn")


def _string_set(node: ast.AST) -> set[str]:
    """The string constants directly inside a set/tuple/list/dict literal (dict: keys)."""
    items: list[ast.AST | None] = []
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        items = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.keys)
    elif isinstance(node, ast.Call) and node.args:  # frozenset({...}), set((...))
        return _string_set(node.args[0])
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _delegates(node: ast.FunctionDef | ast.AsyncFunctionDef, rx: re.Pattern[str]) -> bool:
    """``node``'s body (docstring aside) is one ``return`` of a call to a function whose
    name matches ``rx`` too: a format's adapter handing its data to the one definition
    (``flatbuffer.duplicate_groups`` → ``duplicates.duplicate_groups``), not a second
    place computing the fact."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return bool(rx.fullmatch(name))


def _def_named(pattern: str) -> Callable[[ast.AST, int], str | None]:
    rx = re.compile(pattern)

    def match(node: ast.AST, depth: int) -> str | None:
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and rx.fullmatch(node.name)
            and not _delegates(node, rx)
        ):
            return f"def {node.name}"
        return None

    return match


def _assigned(name: str) -> Callable[[ast.AST, int], str | None]:
    def match(node: ast.AST, depth: int) -> str | None:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if depth == 0 and any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return f"{name} ="
        return None

    return match


def _weight_op_table(node: ast.AST, depth: int) -> str | None:
    """A module-level literal naming both MatMul and Gemm: a table of weight-carrying ops."""
    if depth != 0 or not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
        return None
    if {"MatMul", "Gemm"} <= _string_set(node.value):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        return f"{ast.unparse(target)} = {{...}}"
    return None


# fact -> how its computing definitions are recognised (see the module docstring).
FACTS: dict[str, Callable[[ast.AST, int], str | None]] = {
    "RECIPES (quantization recipes)": _assigned("RECIPES"),
    "weight-op table (ops whose inputs are weights)": _weight_op_table,
    "floor bytes": _def_named(r"_?floor_bytes"),
    "quantized-MatMul count": _def_named(r"_?\w*(matmul_counts?|count_\w*matmuls?)\w*"),
    "duplicate-tensor groups": _def_named(r"_?\w*(duplicate|dup)_?\w*(groups?|tensors?)\w*"),
    "reconciling two counts": _def_named(r"reconcile_\w+"),
}


def _walk_depth(tree: ast.Module) -> Iterator[tuple[ast.AST, int]]:
    """Every node with its nesting depth in functions/classes (0 = module level)."""
    stack: list[tuple[ast.AST, int]] = [(n, 0) for n in tree.body]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        inner = depth + isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        stack += [(c, inner) for c in ast.iter_child_nodes(node)]


def _py_files(root: Path, top: str) -> list[Path]:
    return sorted(p for p in (root / top).rglob("*.py") if "_work" not in p.parts)


_NOT_SOURCE = {"tests", ".git", "_work", "node_modules", "site-packages", "__pycache__"}


def python_lines(root: Path) -> dict[str, Any]:
    """Physical lines of every ``*.py`` in the repository outside ``tests/`` (and outside
    virtual environments and caches), and of ``benchmarks/`` alone: the benchmark share."""
    total = bench = 0
    for f in root.rglob("*.py"):
        parts = f.relative_to(root).parts
        if _NOT_SOURCE & set(parts) or any(p.startswith((".venv", ".peers")) for p in parts):
            continue
        n = len(f.read_text(errors="replace").splitlines())
        total += n
        bench += n if parts[0] == "benchmarks" else 0
    return {
        "outside_tests": total,
        "benchmarks": bench,
        "benchmark_share": round(bench / total, 4) if total else 0.0,
    }


def code_metrics(root: Path) -> dict[str, Any]:
    """Modules, lines, long functions and graph-fact definitions of the packages."""
    modules = lines = 0
    long_functions: list[dict[str, Any]] = []
    facts: dict[str, list[str]] = {fact: [] for fact in FACTS}
    for pkg in PACKAGES:
        for f in _py_files(root, pkg):
            text = f.read_text()
            rel = str(f.relative_to(root))
            modules += 1
            lines += len(text.splitlines())
            tree = ast.parse(text)
            for node, depth in _walk_depth(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    span = (node.end_lineno or node.lineno) - node.lineno + 1
                    if span > LONG:
                        long_functions.append({"function": f"{rel}:{node.name}", "lines": span})
                for fact, match in FACTS.items():
                    found = match(node, depth)
                    if found:
                        facts[fact].append(f"{rel}:{node.lineno} {found}")
    long_functions.sort(key=lambda d: (-d["lines"], d["function"]))
    return {
        "modules": modules,
        "lines": lines,
        "functions_over_100_lines": long_functions,
        **_layout_metrics(root),
        "graph_facts": {k: sorted(v) for k, v in facts.items()},
    }


def _package_of(module: str) -> str:
    """``albert_edge.learn`` for ``albert_edge.learn.tasks``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def _layout_metrics(root: Path) -> dict[str, Any]:
    """Functions over :data:`LONGISH` lines, files over :data:`LONG_FILE` lines, private
    names imported across packages, and lever or benchmark modules importing verify."""
    longish, big, private, verify = 0, [], [], []
    files = [(f, pkg) for pkg in PACKAGES for f in _py_files(root, pkg)]
    files += [(f, "benchmarks") for f in _py_files(root, "benchmarks")]
    for f, pkg in files:
        rel = str(f.relative_to(root))
        text = f.read_text()
        tree = ast.parse(text)
        mod = rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        lever = pkg == "benchmarks" or any(mod.startswith(f"albert_edge.{x}") for x in LEVERS)
        if pkg != "benchmarks" and len(text.splitlines()) > LONG_FILE:
            big.append({"file": rel, "lines": len(text.splitlines())})
        for node in ast.walk(tree):
            if pkg != "benchmarks" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                longish += (node.end_lineno or node.lineno) - node.lineno + 1 > LONGISH
            if isinstance(node, ast.Import) and lever:
                verify += [
                    f"{rel}:{node.lineno}" for a in node.names if a.name == "albert_edge.verify"
                ]
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            names = [a.name for a in node.names]
            if lever and (
                node.module == "albert_edge.verify"
                or (node.module == "albert_edge" and "verify" in names)
            ):
                verify.append(f"{rel}:{node.lineno}")
            if pkg == "benchmarks" or not node.module.startswith(PACKAGES):
                continue
            crossing = _package_of(node.module) != _package_of(mod)
            for a in node.names:
                if crossing and a.name.startswith("_") and not a.name.startswith("__"):
                    private.append(f"{rel}:{node.lineno} from {node.module} import {a.name}")
    return {
        f"functions_over_{LONGISH}_lines": longish,
        f"files_over_{LONG_FILE}_lines": sorted(big, key=lambda d: -d["lines"]),
        "private_imports_across_packages": private,
        "lever_modules_importing_verify": verify,
    }


def benchmark_metrics(root: Path) -> dict[str, Any]:
    """Scripts under benchmarks/: how many, how long, and how they reach the library."""
    out: dict[str, Any] = {}
    for label, folder in (("benchmarks", "benchmarks"), ("studies", "benchmarks/studies")):
        files = [f for f in _py_files(root, folder) if f.name != "__init__.py"]
        if label == "benchmarks":
            files = [f for f in files if "studies" not in f.relative_to(root / folder).parts]
        private: list[str] = []
        patches: list[str] = []
        for f in files:
            rel = str(f.relative_to(root))
            for node in ast.walk(ast.parse(f.read_text())):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module != "__future__"
                    and (node.module or "").split(".")[0] != "benchmarks"  # its own modules
                ):
                    parts = (node.module or "").split(".")
                    names = [a.name for a in node.names]
                    hidden = [n for n in names if n.startswith("_")]
                    if any(p.startswith("_") for p in parts) or hidden:
                        private.append(
                            f"{rel}:{node.lineno} from {node.module} import "
                            + ", ".join(hidden or names)
                        )
                elif isinstance(node, ast.Import):
                    private += [
                        f"{rel}:{node.lineno} import {a.name}"
                        for a in node.names
                        if any(p.startswith("_") for p in a.name.split("."))
                    ]
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"insert", "append"}
                    and ast.unparse(node.func.value) == "sys.path"
                ):
                    patches.append(f"{rel}:{node.lineno}")
        out[label] = {
            "scripts": len(files),
            "lines": sum(len(f.read_text().splitlines()) for f in files),
            "private_imports": private,
            "sys_path_patches": patches,
        }
    return out


def import_metrics(root: Path, contract: Path) -> dict[str, Any]:
    """Import cycles (grimp) and lint-imports against the tree's own and ``contract``."""
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools/import_graph.py")
    assert spec is not None and spec.loader is not None
    graph = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph)
    edges = graph.import_edges(root)
    cycles = graph._sccs(edges)
    layering = {
        "own contract": _lint_imports(root, root / "pyproject.toml"),
        "current contract": _lint_imports(root, contract),
    }
    return {
        "import_graph_modules": len(edges),
        "internal_imports": sum(len(v) for v in edges.values()),
        "import_cycles": cycles,
        "layering": layering,
    }


def _lint_imports(root: Path, config: Path) -> dict[str, Any]:
    """lint-imports on ``root``'s packages with ``config``: broken contracts, offending lines."""
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}
    r = subprocess.run(
        [str(exe), str(config), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    text = r.stdout + r.stderr
    m = re.search(r"Contracts: (\d+) kept, (\d+) broken", text)
    offending = [
        ln.strip() for ln in text.splitlines() if re.match(r"^\s*-\s+[\w.]+ -> [\w.]+", ln)
    ]
    if m is None:  # the contract could not be checked on this tree: say why, in one line
        why = [ln.strip() for ln in text.splitlines() if re.search(r"Missing|[Ee]rror", ln)]
        return {"error": " ".join(why[:2]) or f"lint-imports exited {r.returncode}"}
    return {"kept": int(m[1]), "broken": int(m[2]), "offending_imports": offending}


def ir_proto_crossings(root: Path) -> dict[str, Any]:
    """How often one ``convert --precision int8-dynamic`` of the embedded model (verify
    included, as the CLI runs it) turns a whole model from onnx-ir into protobuf or back.

    Counted by wrapping onnx-ir's model-level entry points (``from_proto``/``to_proto`` on a
    model, ``serde.deserialize_model``/``serialize_model``, ``load``/``save``); a call made
    inside another counted call is the same crossing and is not counted twice.
    """
    import traceback

    import onnx
    import onnx_ir as ir

    calls: list[tuple[str, str]] = []  # (entry point, the albert-edge function that called it)
    depth = [0]

    def caller() -> str:
        for f in reversed(traceback.extract_stack()[:-2]):
            path = f.filename.replace("\\", "/")
            if "/albert_edge/" in path or "/converters/" in path:
                return (
                    f"{path.rsplit('/albert_edge/', 1)[-1].rsplit('/converters/', 1)[-1]}:{f.name}"
                )
        return "?"

    def wrap(owner: Any, name: str, label: str, is_model: Callable[[Any], bool]) -> None:
        original = getattr(owner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            top = depth[0] == 0 and (not args or is_model(args[0]))
            if top:
                calls.append((label, caller()))
            depth[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1

        setattr(owner, name, counted)

    def proto(x: Any) -> bool:
        return isinstance(x, onnx.ModelProto)

    def model(x: Any) -> bool:
        return isinstance(x, ir.Model)

    def anything(x: Any) -> bool:
        return True

    wrap(ir, "from_proto", "proto -> IR (from_proto)", proto)
    wrap(ir, "to_proto", "IR -> proto (to_proto)", model)
    wrap(ir.serde, "deserialize_model", "proto -> IR (serde)", anything)
    wrap(ir.serde, "serialize_model", "IR -> proto (serde)", anything)
    wrap(ir, "load", "file -> IR (load)", anything)
    wrap(ir, "save", "IR -> file (save)", anything)
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    with tempfile.TemporaryDirectory(prefix="crossings-") as tmp:
        convert(None, Path(tmp) / "int8", ConvertOptions(precision="int8-dynamic"))
    ends = int(bool(calls) and calls[0][0].startswith(("proto -> IR", "file -> IR")))
    ends += int(len(calls) > ends and calls[-1][0].startswith(("IR -> proto", "IR -> file")))
    return {
        "total": len(calls),
        "between": len(calls) - ends,
        "by_entry_point": dict(sorted(Counter(label for label, _ in calls).items())),
        "in_order": [f"{label} in {who}" for label, who in calls],
    }


def readme_metrics(root: Path) -> dict[str, Any]:
    text = (root / "README.md").read_text()
    return {"lines": len(text.splitlines()), "characters": len(text)}


def measure(root: Path, contract: Path, *, convert: bool = True) -> dict[str, Any]:
    """Every metric of one tree (run in its own process: see :func:`measure_in_child`)."""
    out = {
        **code_metrics(root),
        **import_metrics(root, contract),
        "benchmarks": benchmark_metrics(root),
        "python_lines": python_lines(root),
        "readme": readme_metrics(root),
    }
    if convert:
        out["ir_proto_crossings"] = ir_proto_crossings(root)
    return out


def measure_in_child(root: Path, *, convert: bool = True) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter, so grimp imports only ``root``'s packages."""
    r = subprocess.run(
        [sys.executable, __file__, "--measure", str(root), *([] if convert else ["--no-convert"])],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
    )
    if r.returncode != 0:
        raise SystemExit(f"measuring {root} failed: {r.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit``, unpacked with ``git archive`` (no index, HEAD or worktree)."""
    archive = into / "tree.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=f, check=True)
    tree = into / "tree"
    tree.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _row(name: str, values: list[Any]) -> str:
    return f"| {name} | " + " | ".join(str(v) for v in values) + " |"


def _item(d: Any) -> str:
    return f"- `{d}`" if isinstance(d, str) else f"- {d['file']} ({d['lines']})"


def _count(t: dict[str, Any], key: str) -> Any:
    return len(t[key]) if key in t else "not measured"


def markdown(report: dict[str, Any]) -> str:
    """The side-by-side table, then the lists behind each count."""
    labels = list(report["trees"])
    trees = [report["trees"][k] for k in labels]
    md = ["# Codebase metrics", "", f"Measured by `tools/codebase_metrics.py` ({report['when']})."]
    md += ["", "| metric | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]

    def layer(t: dict[str, Any], which: str) -> str:
        d = t["layering"][which]
        if "error" in d:
            return f"error: {d['error'][:60]}"
        return f"{d['broken']} broken, {len(d['offending_imports'])} imports"

    rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("modules (albert_edge + converters)", lambda t: t["modules"]),
        ("lines", lambda t: t["lines"]),
        ("internal imports", lambda t: t["internal_imports"]),
        ("import cycles", lambda t: len(t["import_cycles"])),
        ("layering: the tree's own contract", lambda t: layer(t, "own contract")),
        ("layering: this checkout's contract", lambda t: layer(t, "current contract")),
        (f"functions over {LONG} lines", lambda t: len(t["functions_over_100_lines"])),
        (
            f"functions over {LONGISH} lines",
            lambda t: t.get(f"functions_over_{LONGISH}_lines", "not measured"),
        ),
        (
            f"library files over {LONG_FILE} lines",
            lambda t: _count(t, f"files_over_{LONG_FILE}_lines"),
        ),
        (
            "private names imported from another package",
            lambda t: _count(t, "private_imports_across_packages"),
        ),
        (
            "lever and benchmark modules importing albert_edge.verify",
            lambda t: _count(t, "lever_modules_importing_verify"),
        ),
        *[
            (f"places computing: {fact}", (lambda f: lambda t: len(t["graph_facts"][f]))(fact))
            for fact in FACTS
        ],
        (
            "benchmark scripts (outside studies/)",
            lambda t: t["benchmarks"]["benchmarks"]["scripts"],
        ),
        ("benchmark lines (outside studies/)", lambda t: t["benchmarks"]["benchmarks"]["lines"]),
        (
            "benchmarks: `_private` imports (outside studies/)",
            lambda t: len(t["benchmarks"]["benchmarks"]["private_imports"]),
        ),
        (
            "benchmarks: sys.path patches (outside studies/)",
            lambda t: len(t["benchmarks"]["benchmarks"]["sys_path_patches"]),
        ),
        ("frozen studies (scripts)", lambda t: t["benchmarks"]["studies"]["scripts"]),
        (
            "Python lines outside tests/ (repository)",
            lambda t: t.get("python_lines", {}).get("outside_tests", "not measured"),
        ),
        (
            "… of which benchmarks/ (studies included)",
            lambda t: t.get("python_lines", {}).get("benchmarks", "not measured"),
        ),
        (
            "benchmarks/ share of them",
            lambda t: (
                f"{100 * t['python_lines']['benchmark_share']:.1f} %"
                if "python_lines" in t
                else "not measured"
            ),
        ),
        (
            "IR⇄proto crossings, one int8-dynamic convert",
            lambda t: t.get("ir_proto_crossings", {}).get("total", "not run"),
        ),
        (
            "… of which between the export read-in and the file write",
            lambda t: t.get("ir_proto_crossings", {}).get("between", "not run"),
        ),
        ("README lines", lambda t: t["readme"]["lines"]),
        ("README characters", lambda t: t["readme"]["characters"]),
    ]
    md += [_row(name, [get(t) for t in trees]) for name, get in rows]
    md += [
        "",
        "How each row is counted: the docstring of `tools/codebase_metrics.py`. The trees are",
        "measured as they are: the working tree includes uncommitted work of this session.",
    ]
    for label, t in zip(labels, trees, strict=True):
        md += ["", f"## {label}", "", f"### Functions over {LONG} lines", ""]
        md += [f"- {d['function']} ({d['lines']})" for d in t["functions_over_100_lines"]]
        for key, title in (
            (f"files_over_{LONG_FILE}_lines", f"Library files over {LONG_FILE} lines"),
            ("private_imports_across_packages", "Private names imported from another package"),
            ("lever_modules_importing_verify", "Lever and benchmark modules importing verify"),
        ):
            if key in t:
                md += ["", f"### {title}", ""]
                md += [_item(d) for d in t[key]] or ["- none"]
        md += ["", "### Where each graph fact is computed", ""]
        for fact, places in t["graph_facts"].items():
            md.append(f"- {fact}: " + ("; ".join(f"`{p}`" for p in places) or "none"))
        cross = t.get("ir_proto_crossings")
        if cross:
            md += ["", "### IR⇄proto crossings, one `convert --precision int8-dynamic`", ""]
            md += [f"- {k}: {v}" for k, v in cross["by_entry_point"].items()]
            if cross.get("in_order"):
                md += ["", "In order, with the function that made each:", ""]
                md += [f"{i}. {c}" for i, c in enumerate(cross["in_order"], 1)]
        md += ["", "### Import cycles", ""]
        md += [f"- {' <-> '.join(c)}" for c in t["import_cycles"]] or ["- none"]
        b = t["benchmarks"]
        md += ["", "### benchmarks: `_private` imports and sys.path patches", ""]
        for where in ("benchmarks", "studies"):
            for p in b[where]["private_imports"]:
                md.append(f"- {where}: `{p}`")
            if b[where]["sys_path_patches"]:
                md.append(
                    f"- {where}: sys.path patched at " + ", ".join(b[where]["sys_path_patches"])
                )
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="a commit to measure beside this tree")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument(
        "--no-convert", action="store_true", help="skip the IR/proto crossings (one convert)"
    )
    ap.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    contract = ROOT / "pyproject.toml"
    if a.measure is not None:  # the child: one tree, JSON on stdout
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # convert's report is not the JSON
            result = measure(a.measure.resolve(), contract, convert=not a.no_convert)
        print(json.dumps(result))
        return 0
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    trees: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="codebase-metrics-") as tmp:
        if a.before:
            before = unpack(a.before, Path(tmp))
            trees[f"before ({a.before})"] = measure_in_child(before, convert=not a.no_convert)
        trees[f"after (working tree on {head})"] = measure_in_child(ROOT, convert=not a.no_convert)
    import datetime

    report = {
        "benchmark": "codebase_metrics",
        "when": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "trees": trees,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "codebase_metrics.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (a.out / "codebase_metrics.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
