"""``albert-edge``: a thin CLI over the public API.

Each subcommand parses its flags, makes exactly one API call, and prints the result.
Errors the user can fix are :class:`AlbertEdgeError`: printed as one line, exit non-zero.
``convert``, ``quantize`` and ``train`` are defined here; a package's subcommand in its
``command.py``, the others (verify, inspect, kernels, bench, export-triton) in
:mod:`albert_edge.commands`. This module assembles them and checks what can be checked
before anything loads.
"""

from __future__ import annotations

if __name__ == "__main__":  # first thing: a signal during the imports below waits for main
    from albert_edge.signals import hold_stop_signals

    hold_stop_signals()

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_edge.commands.args import add_quiet, ints, print_json
from albert_edge.environment import (
    check_thread_env,
    describe_resource_error,
    native_stderr_filtered,
    quiet_frameworks,
)
from albert_edge.errors import AlbertEdgeError
from albert_edge.io import output_arg
from albert_edge.options import ONNX_PRECISIONS, STATIC_PRECISIONS, TFLITE_PRECISIONS
from albert_edge.options import int_at_least as _at_least

# --- convert -------------------------------------------------------------------------


def _add_quantization_flags(p: argparse.ArgumentParser) -> None:
    """The flags ``convert`` and ``quantize`` share: one definition, one meaning."""
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="int8-static / int8-full: calibration text file or SST-2 style .tsv (default: "
        "512 SST-2 train sentences shipped in the package, "
        "albert_edge/samples/sst2_train_calibration.tsv)",
    )
    p.add_argument(
        "--num-calibration",
        type=_at_least(1),
        default=128,
        help="number of calibration sentences to use (default: %(default)s)",
    )
    p.add_argument(
        "--calibration-method",
        default="minmax",
        choices=("minmax", "entropy", "percentile"),
        help="how int8-static picks activation ranges (default: %(default)s)",
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
        help="int8 (and int4 on int8 kernels): one weight scale per tensor, every weight "
        "(ONNX --target portable's and TFLite int8-full's default is per tensor except a "
        "weight whose output channels spread over 4x, stored per channel)",
    )
    gran.add_argument(
        "--per-channel",
        dest="per_channel",
        action="store_true",
        help="int8 (and int4 on int8 kernels): one weight scale per output channel (default "
        "for the other targets; int4: more accurate on some models, 3-7%% slower at short "
        "lengths)",
    )
    p.add_argument(
        "--block-size",
        type=_at_least(1),
        default=256,
        help="int4 (and int4 embedding) quantization block size, a power of two >= 16, per "
        "weight halved until it divides K (default: %(default)s, chosen by "
        "benchmarks/studies/int4_floor.py)",
    )
    p.add_argument(
        "--int4-kernel",
        choices=("int8", "nbits"),
        default="int8",
        help="int4: the kernel that multiplies by the 4-bit weights. int8 (default): the "
        "codes are decoded at load into ONNX Runtime's int8 kernels, int8-dynamic's speed at "
        "int4's size; nbits: MatMulNBits (ONNX Runtime's GPU and ARM int4 kernels; about "
        "half int8's speed on x86 CPUs)",
    )
    p.add_argument(
        "--target",
        dest="runs_on",
        default="portable",
        choices=("portable", "x86-vnni", "arm64", "wasm", "gpu"),
        help="the CPUs the int8 artifact will run on (default portable: right on every "
        "kernel, x86 AVX2 included; x86-vnni/arm64/wasm keep 8-bit weights, which saturate "
        "on AVX2-only x86); gpu: --to tflite, fp16 GPU-clean graph for LiteRT's GPU "
        "accelerator (int8 is the CPU/NPU format)",
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
        "int4_kernel": a.int4_kernel,
    }


def _report_manifest(a: argparse.Namespace, manifest: dict[str, Any]) -> int:
    from albert_edge.report import print_convert_report

    if a.json:
        print_json(manifest)
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
    p.add_argument(
        "--to",
        dest="target",
        choices=("onnx", "tflite"),
        default="onnx",
        help="artifact format (default: %(default)s)",
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_arg,
        help="artifact directory to write (a Hugging Face model repo layout; replaced atomically)",
    )
    p.add_argument(
        "--precision",
        default=None,
        help=f"onnx: {{{','.join(ONNX_PRECISIONS)}}}; tflite: {{{','.join(TFLITE_PRECISIONS)}}} "
        "(default fp32; fp16 with --target gpu); auto (onnx, tflite) = a precision per weight "
        "chosen on held-out rows (--max-drop, --data; docs/mixed-precision.md)",
    )
    p.add_argument(
        "--optimize",
        choices=("none", "fuse"),
        default="fuse",
        help="onnx: fuse = ONNX Runtime's transformer fusions, weights still shared "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--opset",
        type=_at_least(1),
        default=17,
        help="onnx: ONNX opset to export (default: %(default)s)",
    )
    p.add_argument(
        "--seq-lens",
        type=ints,
        default=(),
        help="tflite: comma-separated sequence-length buckets, one signature each; the "
        "runner takes the smallest that fits (default: 16,32,64,128, capped at max positions; "
        "question-answering adds 384 where positions allow)",
    )
    _add_quantization_flags(p)
    p.add_argument(
        "--int8-io",
        action="store_true",
        help="tflite int8-full: int8 model inputs/outputs where possible",
    )
    p.add_argument("--no-verify", action="store_true", help="skip the comparison against PyTorch")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the output directory if it exists"
    )
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    from albert_edge.depth.command import add_depth_flags, add_rule_flags

    add_depth_flags(p)  # --depth K|auto --depth-search DIR --exit-head (docs/depth.md)
    add_rule_flags(p)
    from albert_edge.mixed.command import add_mixed_flags

    add_mixed_flags(p)  # --precision auto --max-drop --data / --precision-plan
    add_quiet(p)
    p.set_defaults(run=_run_convert)


def _run_convert(a: argparse.Namespace) -> int:
    from albert_edge.depth.command import check_ignored_flags
    from albert_edge.mixed.command import check_search_flags, run_mixed, wants_plan

    # a flag this run would ignore: one line, before anything is read
    check_search_flags(a)
    check_ignored_flags(a, searching=wants_plan(a) and a.precision_plan is None)
    if wants_plan(a):  # precision per weight (docs/mixed-precision.md)
        return _report_manifest(a, run_mixed(a, lambda p: _convert_options(a, p)))
    from albert_edge.convert import convert

    options = _convert_options(a, a.precision)
    if a.depth is not None or a.depth_search is not None:
        from albert_edge.depth.command import run_convert_at_depth

        return _report_manifest(a, run_convert_at_depth(a, options))
    if options.target == "onnx" and options.precision not in ("fp32", "fp16"):
        from albert_edge.onnx.quant import check_options

        check_options(options)  # e.g. int8-static without --calibration: before the load
    return _report_manifest(a, convert(a.checkpoint, a.output, options))


def _convert_options(a: argparse.Namespace, precision: str | None) -> Any:
    from albert_edge.options import ConvertOptions

    return ConvertOptions(
        target=a.target,
        precision=precision or ("fp16" if a.runs_on == "gpu" else "fp32"),
        accelerator="gpu" if a.runs_on == "gpu" else "cpu",
        optimize=a.optimize,
        opset=a.opset,
        seq_lens=a.seq_lens,
        int8_io=a.int8_io,
        overwrite=a.overwrite,
        verify=not a.no_verify,
        # --target gpu picks the accelerator, not an int8 CPU recipe.
        **{**_quantization_options(a), **({"runs_on": "portable"} if a.runs_on == "gpu" else {})},
    )


# --- quantize ------------------------------------------------------------------------


def _add_quantize(sub: Any) -> None:
    p = sub.add_parser("quantize", help="quantize an fp32 ONNX artifact")
    p.add_argument("model", type=Path, help="model.onnx (or its artifact directory)")
    p.add_argument(
        "--precision",
        required=True,
        help=f"one of {{{','.join(p for p in ONNX_PRECISIONS if p != 'fp32')}}}",
    )
    p.add_argument(
        "-o", "--output", required=True, type=output_arg, help="new artifact directory to write"
    )
    p.add_argument(
        "--reference",
        default=None,
        help="checkpoint to verify against (default: the embedded model when the artifact "
        "came from it; otherwise verification is skipped)",
    )
    _add_quantization_flags(p)
    p.add_argument("--no-verify", action="store_true", help="skip the comparison against PyTorch")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the output directory if it exists"
    )
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    add_quiet(p)
    p.set_defaults(run=_run_quantize)


def _run_quantize(a: argparse.Namespace) -> int:
    from albert_edge.onnx.quant.artifact import quantize_artifact
    from albert_edge.options import ConvertOptions

    options = ConvertOptions(
        target="onnx",
        precision=a.precision,
        overwrite=a.overwrite,
        verify=not a.no_verify,
        **_quantization_options(a),
    )
    return _report_manifest(a, quantize_artifact(a.model, a.output, options, reference=a.reference))


# --- the parser ----------------------------------------------------------------------


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error (the usage is one --help away)."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def _add_train(sub: Any) -> None:
    from albert_edge.train import add_arguments

    p = sub.add_parser(
        "train",
        help="train or fine-tune (--init) a classifier of single sentences or pairs, a tagger "
        "(CoNLL) or an extractive QA model (SQuAD): the --train file decides the head "
        "(docs/training.md, docs/tasks.md)",
        description="Train or fine-tune (--init CKPT) an ALBERT on a labelled file: GLUE-style "
        ".tsv of single sentences or pairs (a classifier), CoNLL-2003 (a tagger) or SQuAD "
        "JSON (an extractive QA model); the file decides the head, the epoch is chosen on "
        "held-out rows of --train. docs/training.md, docs/tasks.md.",
    )
    add_arguments(p)  # --quiet included: python -m albert_edge.train has it too
    p.set_defaults(run=_run_train)


def _run_train(a: argparse.Namespace) -> int:
    from albert_edge.train import run

    return run(a)


def build_parser() -> argparse.ArgumentParser:
    from albert_edge.version import __version__

    parser = _OneLineParser(
        prog="albert-edge",
        description="Ship a trained ALBERT (classifier, tagger, QA) to the edge: train, "
        "convert, quantize, verify, inspect, bench, optimize.",
        epilog="Every command without a checkpoint uses the embedded SST-2 model; "
        "albert-edge COMMAND --help lists its options. Docs: docs/index.md.",
    )
    parser.add_argument("--version", action="version", version=f"albert-edge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from albert_edge.commands import bench, inspect, triton, verify

    for add in (
        _add_convert,
        _add_quantize,
        verify.add_parser,
        inspect.add_kernels,
        inspect.add_inspect,
        bench.add_parser,
        triton.add_parser,
        _add_train,
    ):
        add(sub)
    from albert_edge.depth.command import add_parser as _add_depth

    _add_depth(sub, add_quiet)
    from albert_edge.early_exit.command import add_parser as _add_early_exit

    _add_early_exit(sub, add_quiet)
    from albert_edge.vocab.command import add_parser as _add_trim

    _add_trim(sub, add_quiet)
    from albert_edge.prune.command import add_parser as _add_prune

    _add_prune(sub, add_quiet)
    from albert_edge.optimize.command import add_parser as _add_optimize

    _add_optimize(sub, add_quiet)
    return parser


# Repeatable list flags: a value given twice is run once, and the user is told so.
_LIST_FLAGS = (
    ("batch_sizes", "--batch-sizes"),
    ("seq_lens", "--seq-lens"),
    ("batch", "--batch"),
    ("threads", "--threads"),
)


def _drop_duplicates(args: argparse.Namespace) -> None:
    for attr, flag in _LIST_FLAGS:
        values = getattr(args, attr, None)
        if isinstance(values, tuple) and len(set(values)) < len(values):
            kept = tuple(dict.fromkeys(values))
            setattr(args, attr, kept)
            print(  # not progress: said even with --quiet, the run differs from the ask
                f"albert-edge {args.command}: note: {flag} lists a value twice; running "
                f"{','.join(map(str, kept))} once each",
                file=sys.stderr,
            )


def _preflight(args: argparse.Namespace) -> None:
    """Everything that can be checked before anything loads (issue 26: refusals came after
    minutes of work): the working directory, output names, existing outputs, repeats."""
    from albert_edge.errors import WorkingDirectoryError
    from albert_edge.io import check_name_fits, check_output

    check_thread_env()  # before torch / ONNX Runtime read it

    try:
        os.getcwd()
    except OSError:  # deleted under the shell: torch and MKL die later with a fatal error
        raise WorkingDirectoryError(
            "the current directory no longer exists (deleted, moved or replaced, e.g. by "
            '-o . --overwrite, while the shell was in it); cd to an existing directory (cd "$PWD" '
            "enters one made again at the same path) and run again"
        ) from None
    if args.command in ("convert", "quantize"):
        source = args.checkpoint if args.command == "convert" else args.model
        check_name_fits(args.output)
        inputs = [Path(source)] if source is not None else []
        # every directory or file the run reads is an input too: -o DIR/x inside a depth
        # search broke its seal, as one inside an artifact breaks its manifest (a
        # --depth-search that is no search is never read: its own refusal says so)
        for flag in ("depth_search", "data", "calibration", "precision_plan", "reference"):
            given = getattr(args, flag, None)
            if given is not None and (flag != "depth_search" or _is_sealed(Path(given))):
                inputs.append(Path(given))
        if args.command == "quantize":  # the whole artifact is the input, not its model file
            from albert_edge.layout import find_artifact

            found = find_artifact(source)
            if found.manifest is not None:
                inputs.append(found.root)
        check_output(args.output, overwrite=args.overwrite, inputs=inputs)
    elif args.command == "train":
        from albert_edge.learn.command import check_ignored
        from albert_edge.train import check_data

        check_name_fits(args.out)
        check_ignored(args)  # --alpha without a teacher, --qat-target without --qat
        check_data(args)  # --train (and the SST-2 recipe's --dev) given: no default file
    elif args.command == "export-triton":
        check_name_fits(args.output / (args.name or "model"), "-o / --name")
    elif args.command == "bench":
        from albert_edge.commands.bench import check_flags

        check_flags(args)
        for flag, path in (
            ("--json", args.json_out),
            ("--markdown", args.markdown),
            ("--plot", args.plot),
            ("--work-dir", args.work_dir),
        ):
            if path is not None:  # --json streams rows to JSON.rows.jsonl beside it
                check_name_fits(path, flag, ".rows.jsonl" if flag == "--json" else "")
    _drop_duplicates(args)
    _read_text_inputs(args)


def _is_sealed(folder: Path) -> bool:
    from albert_edge.sealed import SEAL_NAME

    return (folder / SEAL_NAME).is_file()


def _read_text_inputs(args: argparse.Namespace) -> None:
    """Read the small text inputs now, so that a missing, binary, UTF-16 or label-less
    file is refused in the first second, not after the model loaded (they are read again
    where they are used: a few milliseconds)."""
    from albert_edge.data import precheck_calibration, read_sst2

    # Only where the precision reads it: for the others the flag itself is the error,
    # which the option check names (a file's content is the wrong thing to blame). Any
    # task's file, judged against the model's head (config.json) before torch loads.
    if args.command in ("convert", "quantize") and (
        getattr(args, "precision", None) in STATIC_PRECISIONS
    ):
        model = args.checkpoint if args.command == "convert" else args.model
        note = precheck_calibration(args.calibration, args.num_calibration, model)
        if note is not None:
            print(f"albert-edge {args.command}: {note}", file=sys.stderr)
    if getattr(args, "data", None) is not None and args.command == "verify":
        from albert_edge.tasks import precheck_file

        precheck_file(args.data, getattr(args, "task", None))
    if getattr(args, "data", None) is not None and args.command == "bench":
        if getattr(args, "recommend", False):  # any task file, judged against the head
            from albert_edge.bench.recommend import precheck_data

            precheck_data(args)
        else:
            read_sst2(args.data)
    if args.command == "train":  # a task file (pairs, CoNLL, SQuAD) or SST-2's
        from albert_edge.learn.tasks import preflight

        preflight(args)


def _say_if_cwd_replaced(command: str) -> None:
    """``-o .`` (or an output holding the working directory) swapped a new directory in
    where the shell sits: the shell still sees the old, removed one until it re-enters."""
    from albert_edge.io import replaced_cwd

    out = replaced_cwd()
    if out is not None:
        print(
            f"albert-edge {command}: note: {out} was replaced while it was the current "
            'directory; a shell still in it sees the old, removed one: run cd "$PWD"',
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    # named before parsing, so a signal during start-up names the subcommand too
    command = f" {raw[0]}" if raw and raw[0].replace("-", "").isalnum() else ""
    from albert_edge.signals import release_stop_signals, signals_interrupt

    with signals_interrupt():
        try:
            release_stop_signals()  # a signal during start-up is reported from here
            quiet_frameworks()
            parser = build_parser()
            args = parser.parse_args(argv)
            command = f" {args.command}"
            return _run(args)
        except KeyboardInterrupt as exc:
            from albert_edge.signals import report_stopped

            return report_stopped(f"albert-edge{command}", exc)


def _run(args: argparse.Namespace) -> int:
    from albert_edge.progress import set_enabled
    from albert_edge.scratch import run_scratch

    set_enabled(not getattr(args, "quiet", False))
    try:
        _preflight(args)
        # -q: also drop TensorFlow/LiteRT/absl start-up lines, the children's included
        quiet = getattr(args, "quiet", False)
        with run_scratch(), native_stderr_filtered() if quiet else contextlib.nullcontext():
            code: int = args.run(args)
        _say_if_cwd_replaced(args.command)
        return code
    except AlbertEdgeError as exc:
        print(f"albert-edge {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (MemoryError, ImportError, OSError) as exc:
        limited = describe_resource_error(exc)  # ulimit -v / -n: the limit, not the path
        if limited is None and not isinstance(exc, OSError):
            raise
        if limited is not None:
            print(f"albert-edge {args.command}: error: {limited}", file=sys.stderr)
            return 2
        assert isinstance(exc, OSError)
        # the safety net: a file error is one line, never a traceback
        where = exc.filename or "a file"
        print(
            f"albert-edge {args.command}: error: {where}: {exc.strerror or exc}; "
            "check the path and its permissions",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
