"""The artifact's model card (README.md), generated from its manifest.

Why generated: the figures a user reads (size against the floor, precision, errors
against PyTorch) must be the ones the manifest recorded, never hand-copied. The card also
names the runtimes known to load the layout and their minimum versions, and the front
matter follows the Hugging Face model-card metadata so a hub upload renders it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Runtimes the project's client tests load the layout with (tests/clients/), and the
# oldest version each was tested or is documented to need for these ops.
RUNTIMES_ONNX = (
    ("onnxruntime (Python)", ">= 1.20", "ORT's com.microsoft contrib ops (fused graph)"),
    ("optimum ORTModelForSequenceClassification", "optimum-onnx >= 0.1", "file_name / subfolder"),
    ("onnxruntime-node", ">= 1.30", "npm"),
    ("onnxruntime-web (wasm)", ">= 1.30", "Node and browsers"),
    ("@huggingface/transformers (transformers.js)", ">= 4.3", "pipeline(task, local dir)"),
    ("Triton Inference Server", "onnxruntime backend", "albert-edge export-triton"),
)
RUNTIMES_TFLITE = (
    ("ai-edge-litert (Python)", ">= 2.0", "XNNPACK on CPU"),
    ("LiteRT / TFLite Android", "2.16+", "op versions listed in manifest.json"),
    ("LiteRT.js (@litertjs/core)", ">= 2.5", "browsers, wasm (tested in headless Chromium)"),
    ("tflite-support MetadataDisplayer / BertNLClassifier", "0.4.4", "metadata; Task Library"),
)


# head (albert_edge.heads) -> (Hugging Face pipeline_tag, optimum's ORTModel class or None,
# a call of that pipeline on a made-up input or None). The tag is what the Hub lists and
# filters the model under and what a transformers.js ``pipeline(task, dir)`` runs; a bare
# encoder (no head) is the only one left at feature-extraction. AlbertForPreTraining's
# masked-LM logits are what it serves (its sentence-order logits have no pipeline).
PIPELINES: dict[str, tuple[str, str | None, str | None]] = {
    "sequence-classification": (
        "text-classification",
        "ORTModelForSequenceClassification",
        'run("a gripping film", truncation=True)',
    ),
    "token-classification": (
        "token-classification",
        "ORTModelForTokenClassification",
        'run("Anna Lee flew to Paris on Monday .")',
    ),
    "question-answering": (
        "question-answering",
        "ORTModelForQuestionAnswering",
        'run(question="Where did Anna fly?", context="Anna Lee flew to Paris on Monday.")',
    ),
    "masked-lm": ("fill-mask", "ORTModelForMaskedLM", 'run("a gripping [MASK] .")'),
    "pretraining": ("fill-mask", None, None),
    "multiple-choice": ("multiple-choice", "ORTModelForMultipleChoice", None),
    "base": ("feature-extraction", "ORTModelForFeatureExtraction", 'run("a gripping film")'),
}


def pipeline_tag(head: str) -> str:
    """The model card's ``pipeline_tag`` for ``head`` (an unknown head: feature-extraction,
    the one every encoder serves)."""
    return PIPELINES.get(head, PIPELINES["base"])[0]


def _version() -> str:
    from albert_edge.version import __version__

    return str(__version__)


def _mb(n: Any) -> str:
    return f"{int(n) / 1e6:.2f} MB" if isinstance(n, int | float) else "n/a"


def depth_lines(depth: Any) -> list[str]:
    """The card's "Depth" section for a truncated model (albert_edge.depth), else nothing:
    a reader must see that this model runs k of its L layers, and on what evidence."""
    if not isinstance(depth, dict):
        return []
    src = depth.get("source") or {}
    lines = [
        "",
        "## Depth",
        "",
        f"- runs **{depth.get('layers')} of {depth.get('of_layers')}** layers of "
        f"`{src.get('name', '?')}` (groups kept: {depth.get('num_hidden_groups')} of "
        f"{depth.get('of_groups')}); head: {depth.get('head')}",
        f"- chosen by: {depth.get('chosen_by')}",
    ]
    ev = depth.get("evidence")
    if isinstance(ev, dict):
        data = ev.get("data") or {}
        # held_out_metric {name, value}; before it, held_out_accuracy + metric (old artifacts)
        held = ev.get("held_out_metric") or {
            "name": ev.get("metric", "accuracy"),
            "value": ev.get("held_out_accuracy"),
        }
        full_ref = ev.get("full_depth_held_out_metric") or {}
        full = float(full_ref.get("value", ev.get("full_depth_held_out_accuracy")) or 0.0)
        lines.append(
            f"- held-out {held['name']} {100 * held['value']:.2f} % vs "
            f"{100 * full:.2f} % at full depth: "
            f"{100 * ev['delta']:+.2f} points [{100 * ev['delta_low']:+.2f}, "
            f"{100 * ev['delta_high']:+.2f}] ({ev.get('interval')}), on "
            f"{data.get('held_out_rows')} rows of `{data.get('file')}` (sha256 "
            f"`{str(data.get('sha256'))[:16]}…`) the head never saw; it was fitted on "
            f"{data.get('fit_rows')} others"
        )
    return lines


def render_model_card(manifest: dict[str, Any]) -> str:
    """Markdown for ``README.md`` of an artifact directory: front matter and origin, files,
    size against the floor, precision and verification, depth, runtimes, use."""
    target = str(manifest.get("target", "onnx"))
    precision = str(manifest.get("precision", "fp32"))
    head = str(manifest.get("head", ""))
    src = manifest.get("source") or {}
    lines = [
        "---",
        "library_name: " + ("transformers.js" if target == "onnx" else "litert"),
        f"pipeline_tag: {pipeline_tag(head)}",
        "tags: [albert, " + ("onnx" if target == "onnx" else "tflite") + f", {precision}]",
        "---",
        "",
        f"# ALBERT ({head}) — {target.upper()} {precision}",
        "",
        "Written by albert-edge "
        f"{manifest.get('albert_edge_version') or _version()} from `{src.get('name', 'unknown')}` "
        f"({src.get('kind', '?')} checkpoint"
        + (
            f", weights sha256 `{str(src['weights_sha256'])[:16]}…`"
            if src.get("weights_sha256")
            else ""
        )
        + ").",
        "",
        "## Files",
        "",
        f"- model: `{manifest.get('model_file', '')}`",
        "- tokenizer: `tokenizer.json` (fast), `spiece.model`, `tokenizer_config.json`, "
        "`special_tokens_map.json`; `config.json`; `manifest.json` (every figure below)",
        *size_lines(manifest),
        *verification_lines(manifest),
        *depth_lines(manifest.get("depth")),
        *runtime_lines(manifest),
        *use_lines(manifest),
        "",
    ]
    return "\n".join(lines)


def size_lines(manifest: dict[str, Any]) -> list[str]:
    """The "Size" section: the file against its floor (every distinct weight once)."""
    sizes = manifest.get("sizes") or {}
    albert = manifest.get("albert") or {}
    return [
        "",
        "## Size",
        "",
        "| file | floor | ratio to floor | unique parameters |",
        "|---:|---:|---:|---:|",
        f"| {_mb(sizes.get('file_bytes'))} | {_mb(sizes.get('floor_bytes'))} | "
        f"{sizes.get('ratio_to_floor', 'n/a')} | {sizes.get('unique_params', 'n/a')} |",
        "",
        "The floor is every distinct weight stored once at this precision: ALBERT's shared "
        "layers and factorized embedding "
        f"(V={albert.get('vocab_size', '?')} × E={albert.get('embedding_size', '?')}, "
        f"E × H={albert.get('hidden_size', '?')}) kept as they are.",
        *pruned_lines(albert),
    ]


def pruned_lines(albert: dict[str, Any]) -> list[str]:
    """A pruned checkpoint's shapes, which the floor above counts: the heads each
    shared layer keeps and the FFN width. Nothing for an unpruned model."""
    kept = albert.get("kept_heads")
    if not kept:
        return []
    return [
        "",
        "Pruned inside the shared layers: attention heads kept per shared layer "
        f"{' / '.join(map(str, kept))} of {albert.get('num_attention_heads', '?')} "
        f"(`pruned_heads` in `config.json`), FFN width {albert.get('intermediate_size', '?')}.",
    ]


def verification_lines(manifest: dict[str, Any]) -> list[str]:
    """The "Precision and verification" section: the errors against PyTorch the manifest
    recorded, or why no comparison ran, and where the precision does not pay."""
    quant = manifest.get("quantization") or {}
    recipe = f" — {quant['recipe']}" if quant.get("recipe") else ""
    lines = ["", "## Precision and verification", ""]
    lines.append(f"- precision: **{manifest.get('precision', 'fp32')}**{recipe}")
    ver = manifest.get("verification")
    if isinstance(ver, dict) and ver.get("outputs"):
        lines += [
            f"- verified against PyTorch with {ver.get('runtime', '?')} on batch "
            f"{ver.get('batch_sizes')} × sequence {ver.get('seq_lens')}",
            "",
            "| output | max abs err | mean abs err | SQNR (dB) |",
            "|---|---:|---:|---:|",
        ]
        for name, o in ver["outputs"].items():
            sq = o.get("sqnr_db")
            lines.append(
                f"| {name} | {o.get('max_abs_err', float('nan')):.3g} | "
                f"{o.get('mean_abs_err', float('nan')):.3g} | "
                + (f"{sq:.1f}" if isinstance(sq, int | float) else "n/a")
                + " |"
            )
    else:
        why = ver.get("skipped") if isinstance(ver, dict) else None
        reason = "`--no-verify`" if why in (None, "--no-verify") else str(why)
        lines.append(f"- not verified at conversion ({reason}); run `albert-edge verify`")
    # where a precision does not pay, and how to run it at full speed, said plainly
    for key in ("size_note", "speed_note", "runtime_note"):
        if quant.get(key):
            lines.append(f"- {key.split('_')[0]}: {quant[key]}")
    return lines


def runtime_lines(manifest: dict[str, Any]) -> list[str]:
    """The "Runtimes" table; ONNX's minimum onnxruntime is the one computed from its ops."""
    target = str(manifest.get("target", "onnx"))
    req = manifest.get("requirements") or {}
    lines = ["", "## Runtimes", "", "| runtime | minimum version | note |", "|---|---|---|"]
    ort_class = PIPELINES.get(str(manifest.get("head", "")), PIPELINES["base"])[1]
    for name, ver_s, note in RUNTIMES_ONNX if target == "onnx" else RUNTIMES_TFLITE:
        if name.startswith("optimum "):  # the class that loads this head
            if ort_class is None:
                continue
            name = f"optimum {ort_class}"
        if name == "onnxruntime (Python)" and req.get("min_onnxruntime"):
            # computed from this graph's ops (albert_edge/onnx/requirements.py)
            ver_s = f">= {req['min_onnxruntime']}"
            note = "set by " + ", ".join(req.get("min_onnxruntime_because") or ["its ops"])
        lines.append(f"| {name} | {ver_s} | {note} |")
    openvino = req.get("openvino")
    if target == "onnx" and isinstance(openvino, dict):  # computed from the graph's ops
        measured = str(openvino.get("measured_with", "openvino")).removeprefix("openvino ")
        said = "loads" if openvino.get("loads") else f"cannot load: {openvino.get('why')}"
        lines.append(f"| OpenVINO (CPU) | {measured} (measured) | {said} |")
    return lines


def use_lines(manifest: dict[str, Any]) -> list[str]:
    """The "Use" section: how to load this layout (optimum / transformers.js, or LiteRT)."""
    model_file = str(manifest.get("model_file", ""))
    head = ["", "## Use", ""]
    if str(manifest.get("target", "onnx")) == "onnx":
        sub, _, fname = model_file.rpartition("/")
        task, ort_class, call = PIPELINES.get(str(manifest.get("head", "")), PIPELINES["base"])
        if ort_class is None:  # no optimum class for this head: the graph itself
            return [
                *head,
                "```python",
                "import onnxruntime as ort",
                f'session = ort.InferenceSession("{model_file}")',
                "```",
            ]
        lines = [
            *head,
            "```python",
            f"from optimum.onnxruntime import {ort_class}",
            "from transformers import AutoTokenizer, pipeline",
            f'model = {ort_class}.from_pretrained(".", subfolder="{sub}", file_name="{fname}")',
        ]
        if call is None:  # a head without a pipeline (multiple choice): the model itself
            return [*lines, "```"]
        return [
            *lines,
            f'run = pipeline("{task}", model=model, tokenizer=AutoTokenizer.from_pretrained("."))',
            f"print({call})",
            "```",
            "",
            "```js",
            'import { env, pipeline } from "@huggingface/transformers";',
            "env.allowRemoteModels = false; env.localModelPath = '/path/to/parent/';",
            f"const run = await pipeline('{task}', '<this directory name>');",
            "```",
        ]
    batch = manifest.get("batch") or {}
    return [
        *head,
        "The `.tflite` carries LiteRT metadata (`TFLITE_METADATA`: input/output "
        "descriptions, the SentencePiece tokenizer, `labels.txt`), with `spiece.model` "
        "and `labels.txt` packed in the file's zip tail.",
        "",
        str(batch.get("policy") or "Signatures are batch 1."),
        "",
        "```python",
        "from ai_edge_litert.interpreter import Interpreter",
        f'interp = Interpreter(model_path="{model_file}")',
        "```",
    ]


def write_model_card(out_dir: Path, manifest: dict[str, Any]) -> str:
    (Path(out_dir) / "README.md").write_text(render_model_card(manifest))
    return "README.md"
