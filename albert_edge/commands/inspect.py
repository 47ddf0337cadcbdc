"""``albert-edge inspect`` (a checkpoint's structure, an artifact's bytes and runtimes) and
``albert-edge kernels`` (the CPU kernel families ``verify --on`` reaches, and their set-up)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from albert_edge.commands.args import print_json


def add_inspect(sub: Any) -> None:
    """``inspect``: one checkpoint, model file or artifact directory."""
    p = sub.add_parser(
        "inspect",
        help="ALBERT structure and size accounting of a checkpoint; an artifact's bytes "
        "against its floor and the runtimes it runs on",
    )
    p.add_argument(
        "path",
        nargs="?",
        default=None,
        help="checkpoint, model.onnx, model.tflite or artifact dir (default: embedded)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(run=_run_inspect)


def _run_inspect(a: argparse.Namespace) -> int:
    from albert_edge.early_exit.index import is_early_exit
    from albert_edge.early_exit.verify import format_inspect, inspect_early_exit
    from albert_edge.inspect import inspect_path
    from albert_edge.report import print_inspect_report

    if a.path is not None and is_early_exit(a.path):  # a directory of stepped graphs
        info = inspect_early_exit(a.path)
        print_json(info) if a.json else print(format_inspect(info))
        return 0
    info = inspect_path(a.path)
    if a.json:
        print_json(info)
    else:
        print_inspect_report(info)
    return 0


def add_kernels(sub: Any) -> None:
    """``kernels list`` and ``kernels setup NAME``."""
    p = sub.add_parser(
        "kernels", help="the CPU kernel families int8 artifacts meet, and their set-up"
    )
    ksub = p.add_subparsers(
        dest="kernels_command",
        required=True,
        metavar="ACTION",
        help="list: what verify --on can reach from here; setup NAME: install it",
    )
    ls = ksub.add_parser("list", help="each kernel family and whether verify --on can use it")
    ls.set_defaults(run=_run_kernels_list)
    st = ksub.add_parser("setup", help="install what verify --on NAME needs (apt, pip, npm)")
    st.add_argument(
        "name", choices=("x86-avx2", "x86-vnni", "arm64", "wasm"), help="kernel family to set up"
    )
    st.set_defaults(run=_run_kernels_setup)


def _run_kernels_list(a: argparse.Namespace) -> int:
    from albert_edge.kernels import KERNELS, host_kernel
    from albert_edge.kernels.setup import status

    host = host_kernel()
    for name, fam in KERNELS.items():
        why = status(name)
        state = "this machine" if name == host else ("ready" if why is None else why)
        print(f"{name:9s} {fam.description}\n          via {fam.how}: {state}")
    return 0


def _run_kernels_setup(a: argparse.Namespace) -> int:
    from albert_edge.kernels.setup import setup

    setup(a.name, log=lambda m: print(f"kernels setup {a.name}: {m}", file=sys.stderr))
    return 0
