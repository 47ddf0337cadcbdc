"""``albert-edge``: a thin CLI over the public API.

Each subcommand parses its flags, makes exactly one API call, and prints the result.
Errors the user can fix are :class:`AlbertEdgeError`: printed as one line, exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# --- convert -------------------------------------------------------------------------


def _add_quantization_flags(p: argparse.ArgumentParser) -> None:
    """The flags ``convert`` and ``quantize`` share: one definition, one meaning."""
    p.add_argument("--calibration", type=Path, default=None)
    p.add_argument("--num-calibration", type=int, default=128)
    p.add_argument(
        "--calibration-method", default="minmax", choices=("minmax", "entropy", "percentile")
    )
    p.add_argument(
        "--keep-embeddings-wide",
        action="store_true",
        help="keep the V×E word table in float (default: stored at the quantized precision)",
    )
    # The old opt-in, now the default: accepted so existing scripts keep working.
    p.add_argument("--quantize-embeddings", action="store_true", help=argparse.SUPPRESS)
    gran = p.add_mutually_exclusive_group()
    gran.add_argument(
        "--per-tensor",
        dest="per_channel",
        action="store_false",
        default=None,
        help="int8: one weight scale per tensor (default for ONNX --target portable)",
    )
    gran.add_argument(
        "--per-channel",
        dest="per_channel",
        action="store_true",
        help="int8: one weight scale per output channel (default for the other targets)",
    )
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument(
        "--target",
        dest="runs_on",
        default="portable",
        choices=("portable", "x86-vnni", "arm64", "wasm"),
        help="the CPUs the int8 artifact will run on (default portable: right on every "
        "kernel, x86 AVX2 included; x86-vnni/arm64/wasm keep 8-bit weights, which saturate "
        "on AVX2-only x86)",
    )


def _quantization_options(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "calibration": a.calibration,
        "num_calibration": a.num_calibration,
        "calibration_method": a.calibration_method,
        "quantize_embeddings": not a.keep_embeddings_wide,
        "per_channel": a.per_channel,
        "block_size": a.block_size,
        "runs_on": a.runs_on,
    }


def _report_manifest(a: argparse.Namespace, manifest: dict[str, Any]) -> int:
    from albert_edge.report import print_convert_report

    if a.json:
        _print_json(manifest)
    else:
        print_convert_report(a.output, manifest)
    return 0


def _add_convert(sub: Any) -> None:
    p = sub.add_parser("convert", help="checkpoint -> ONNX or TFLite artifact directory")
    p.add_argument(
        "checkpoint",
        nargs="?",
        default=None,
        help="HF directory or TF1 checkpoint (default: the embedded SST-2 ALBERT)",
    )
    p.add_argument("--to", dest="target", choices=("onnx", "tflite"), default="onnx")
    p.add_argument("-o", "--output", required=True, type=Path)
    p.add_argument(
        "--precision",
        default="fp32",
        help="onnx: fp32|fp16|int8-dynamic|int8-static|int4; "
        "tflite: fp32|fp16|int8-dynamic|int8-full",
    )
    p.add_argument("--optimize", choices=("none", "fuse"), default="fuse")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--seq-lens", type=_ints, default=())
    _add_quantization_flags(p)
    p.add_argument("--int8-io", action="store_true")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(run=_run_convert)


def _run_convert(a: argparse.Namespace) -> int:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    options = ConvertOptions(
        target=a.target,
        precision=a.precision,
        optimize=a.optimize,
        opset=a.opset,
        seq_lens=a.seq_lens,
        int8_io=a.int8_io,
        overwrite=a.overwrite,
        verify=not a.no_verify,
        **_quantization_options(a),
    )
    return _report_manifest(a, convert(a.checkpoint, a.output, options))


# --- quantize ------------------------------------------------------------------------


def _add_quantize(sub: Any) -> None:
    p = sub.add_parser("quantize", help="quantize an fp32 ONNX artifact")
    p.add_argument("model", type=Path, help="model.onnx (or its artifact directory)")
    p.add_argument("--precision", required=True, help="int8-dynamic|int8-static|int4|fp16")
    p.add_argument("-o", "--output", required=True, type=Path)
    _add_quantization_flags(p)
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run_quantize)


def _run_quantize(a: argparse.Namespace) -> int:
    from albert_edge.onnx.quantize import quantize_artifact
    from albert_edge.options import ConvertOptions

    options = ConvertOptions(
        target="onnx", precision=a.precision, overwrite=a.overwrite, **_quantization_options(a)
    )
    return _report_manifest(a, quantize_artifact(a.model, a.output, options))


# --- verify --------------------------------------------------------------------------


def _add_verify(sub: Any) -> None:
    p = sub.add_parser("verify", help="compare an artifact with its PyTorch reference")
    p.add_argument("artifact", type=Path, help="artifact directory or model file")
    p.add_argument(
        "--reference",
        default=None,
        help="checkpoint to compare against (default: the manifest's source)",
    )
    p.add_argument("--data", type=Path, default=None, help="SST-2 style .tsv for accuracy")
    p.add_argument("--batch-sizes", type=_ints, default=(1, 2))
    p.add_argument("--seq-lens", type=_ints, default=())
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-examples", type=int, default=None)
    p.add_argument(
        "--on",
        default=None,
        choices=("x86-avx2", "x86-vnni", "arm64", "wasm"),
        help="run the ONNX artifact on another CPU kernel family (emulated: qemu-user or "
        "onnxruntime-web; set up once with `albert-edge kernels setup NAME`)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run_verify)


def _run_verify(a: argparse.Namespace) -> int:
    from albert_edge.report import print_verify_report
    from albert_edge.verify import verify

    report = verify(
        a.artifact,
        reference=a.reference,
        data=a.data,
        batch_sizes=a.batch_sizes,
        seq_lens=a.seq_lens or None,
        threads=a.threads,
        max_examples=a.max_examples,
        on=a.on,
    )
    if a.json:
        _print_json(report.to_dict())
    else:
        print_verify_report(report)
    if not report.passed:
        print("verify: FAILED: " + "; ".join(report.failures()), file=sys.stderr)
        return 1
    return 0


# --- kernels -------------------------------------------------------------------------


def _add_kernels(sub: Any) -> None:
    p = sub.add_parser(
        "kernels", help="the CPU kernel families int8 artifacts meet, and their set-up"
    )
    ksub = p.add_subparsers(dest="kernels_command", required=True, metavar="ACTION")
    ls = ksub.add_parser("list", help="each kernel family and whether verify --on can use it")
    ls.set_defaults(run=_run_kernels_list)
    st = ksub.add_parser("setup", help="install what verify --on NAME needs (apt, pip, npm)")
    st.add_argument("name", choices=("x86-avx2", "x86-vnni", "arm64", "wasm"))
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


# --- inspect -------------------------------------------------------------------------


def _add_inspect(sub: Any) -> None:
    p = sub.add_parser("inspect", help="ALBERT structure and size accounting")
    p.add_argument(
        "path",
        nargs="?",
        default=None,
        help="checkpoint, model.onnx, model.tflite or artifact dir (default: embedded)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run_inspect)


def _run_inspect(a: argparse.Namespace) -> int:
    from albert_edge.inspect import inspect_path
    from albert_edge.report import print_inspect_report

    info = inspect_path(a.path)
    if a.json:
        _print_json(info)
    else:
        print_inspect_report(info)
    return 0


# --- bench ---------------------------------------------------------------------------


def _add_bench(sub: Any) -> None:
    p = sub.add_parser("bench", help="size, latency and memory of artifacts and checkpoints")
    p.add_argument("targets", nargs="*", help="artifacts or checkpoints (default: embedded)")
    p.add_argument(
        "--backend",
        action="append",
        default=None,
        help="repeatable; default: every backend that can run each target",
    )
    p.add_argument("--batch", type=_ints, default=(1,))
    p.add_argument("--seq-lens", type=_ints, default=(128,))
    p.add_argument("--threads", type=_ints, default=(2,))
    p.add_argument("--runs", type=int, default=None, help="timed runs per shape")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--json", dest="json_out", type=Path, default=None)
    p.add_argument("--markdown", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument("--adb", action="store_true", help="run on a connected Android device")
    p.add_argument("--serial", default=None)
    p.add_argument("--benchmark-model", default=None, help="path of TFLite's benchmark_model")
    p.add_argument(
        "--recommend",
        action="store_true",
        help="convert the checkpoint to every candidate, verify, time, and say which to ship",
    )
    p.add_argument("--data", type=Path, default=None, help="--recommend: SST-2 style .tsv")
    p.add_argument("--candidates", default=None, help="--recommend: e.g. onnx:int8-dynamic,...")
    p.add_argument("--work-dir", type=Path, default=None, help="--recommend: keep artifacts here")
    p.set_defaults(run=_run_bench)


def _run_bench(a: argparse.Namespace) -> int:
    from albert_edge.bench import run_bench_cli

    if a.recommend:
        from albert_edge.bench.recommend import run_recommend_cli

        return run_recommend_cli(a)

    return run_bench_cli(a)


def build_parser() -> argparse.ArgumentParser:
    from albert_edge import __version__

    parser = argparse.ArgumentParser(
        prog="albert-edge",
        description="Ship ALBERT to the edge: convert, quantize, verify, inspect, bench.",
    )
    parser.add_argument("--version", action="version", version=f"albert-edge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_convert, _add_quantize, _add_verify, _add_kernels, _add_inspect, _add_bench):
        add(sub)
    return parser


def quiet_frameworks() -> None:
    """Keep transformers from importing TensorFlow (it does whenever TF is installed).

    albert-edge never uses transformers' TF classes (its TF route builds Keras layers
    itself), and importing TF costs seconds and a screen of C++ log lines per process.
    ``setdefault``: a user's explicit ``USE_TF``/``TF_CPP_MIN_LOG_LEVEL`` wins.
    """
    import logging
    import os
    import warnings

    os.environ.setdefault("USE_TF", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Import-time chatter of transformers' optional torchao integration (CUDA kernels
    # that a CPU build cannot load) and of torch's pytree deprecations: not actionable.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)


def main(argv: Sequence[str] | None = None) -> int:
    quiet_frameworks()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except AlbertEdgeError as exc:
        print(f"albert-edge {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("albert-edge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
