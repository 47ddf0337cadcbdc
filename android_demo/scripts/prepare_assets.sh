#!/usr/bin/env bash
# Builds the demo app's assets with albert-edge and copies them into
# app/src/main/assets/ (git-ignored: the model is megabytes, regenerate it instead):
#
#   albert-edge convert [CHECKPOINT] --to tflite --precision int8-dynamic \
#       --quantize-embeddings --seq-lens 32,64,128 -o <work dir>
#
# (--quantize-embeddings: the V×E word table in int8 too; for the SST-2 model the asset is
# 2.4 MB instead of 8.1 MB at the same dev accuracy, benchmarks/results/peers.md)
#
# plus the GPU artifact (`convert --to tflite --target gpu`: fp16, GPU-clean graph) as
# model_gpu.tflite, then model.tflite and spiece.model from the first artifact, plus two
# small generated files:
# model_info.json (artifact name, precision, labels from config.json's id2label, sequence
# lengths, file and floor bytes from manifest.json) and bench_sentences.txt (the first 128
# SST-2 dev sentences, the benchmark's inputs).
#
# Usage (from anywhere, with albert-edge installed, e.g. the repository's .venv active):
#   android_demo/scripts/prepare_assets.sh                 # the embedded SST-2 model
#   android_demo/scripts/prepare_assets.sh path/to/ckpt    # any ALBERT classifier
# Environment: ALBERT_EDGE (the command, default albert-edge), PYTHON (default python3),
# ALBERT_EDGE_SHARED (where data/sst2/dev.tsv lives, default ../shared beside the repo).
set -euo pipefail

demo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="$(cd "$demo/.." && pwd)"
assets="$demo/app/src/main/assets"
albert_edge="${ALBERT_EDGE:-albert-edge}"
python="${PYTHON:-python3}"

if [ "$#" -gt 1 ]; then
    echo "usage: $0 [CHECKPOINT]" >&2
    exit 2
fi
if ! command -v "$albert_edge" >/dev/null 2>&1; then
    echo "$albert_edge not found: activate the repository's virtualenv (. .venv/bin/activate) or pip install -e $repo" >&2
    exit 2
fi

name="sst2-albert-tiny"
if [ "$#" -eq 1 ]; then
    name="$(basename "${1%/}")"
fi
work="$demo/build/$name.tflite-int8-dynamic"
mkdir -p "$demo/build"

"$albert_edge" convert "$@" --to tflite --precision int8-dynamic --quantize-embeddings \
    --seq-lens 32,64,128 -o "$work" --overwrite

# The GPU choice gets its own artifact: fp16 weights, GPU-clean graph (no BROADCAST_TO),
# at most one CPU-GPU boundary (the embedding lookup). int8 is the CPU/NPU format.
gpu_work="$demo/build/$name.tflite-gpu"
"$albert_edge" convert "$@" --to tflite --target gpu --seq-lens 32,64,128 -o "$gpu_work" --overwrite
"$albert_edge" inspect "$gpu_work/model.tflite" --json > "$demo/build/$name.gpu-inspect.json"

for f in model.tflite spiece.model manifest.json config.json; do
    if [ ! -f "$work/$f" ]; then
        echo "$work/$f is missing: the conversion did not produce a complete artifact" >&2
        exit 1
    fi
done

mkdir -p "$assets"
tmp="$(mktemp -d "$assets/.prepare.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$work/model.tflite" "$work/spiece.model" "$tmp/"
cp "$gpu_work/model.tflite" "$tmp/model_gpu.tflite"

ALBERT_EDGE_GPU_INSPECT="$demo/build/$name.gpu-inspect.json" \
ALBERT_EDGE_WORK="$work" ALBERT_EDGE_OUT="$tmp" ALBERT_EDGE_REPO="$repo" "$python" - <<'PY'
import json
import os
import sys
from pathlib import Path

work = Path(os.environ["ALBERT_EDGE_WORK"])
out = Path(os.environ["ALBERT_EDGE_OUT"])
repo = Path(os.environ["ALBERT_EDGE_REPO"])
manifest = json.loads((work / "manifest.json").read_text())
config = json.loads((work / "config.json").read_text())

if manifest.get("head") != "sequence-classification":
    sys.exit(f"{work}: the demo classifies sentences; this artifact's head is "
             f"{manifest.get('head')!r}, convert a sequence-classification checkpoint")
id2label = config.get("id2label") or {}
n = len(id2label) or int(config.get("num_labels", 2))
labels = [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(n)]
sizes = manifest.get("sizes", {})
seq_lens = sorted({int(s["seq_len"]) for s in manifest.get("signatures", []) if s.get("seq_len")}
                  or manifest.get("seq_lens") or [32, 64, 128])
info = {
    "artifact": work.name,
    "precision": manifest.get("precision", "int8-dynamic"),
    "labels": labels,
    "seq_lens": seq_lens,
    "file_bytes": sizes.get("file_bytes"),
    "floor_bytes": sizes.get("floor_bytes"),
    "source": manifest.get("source", {}).get("path"),
}
# model_gpu.tflite: what albert-edge's GPU rule table predicts (the app shows it, and flags
# a fallback or a disagreement with LiteRT's own is_fully_accelerated).
gpu = json.loads(Path(os.environ["ALBERT_EDGE_GPU_INSPECT"]).read_text())["delegates"]["gpu"]
sub = max(gpu["subgraphs"], key=lambda s: s["ops"])
info["gpu_model"] = {
    "file": "model_gpu.tflite",
    "precision": "fp16",
    "ops": sub["ops"],
    "gpu_ops": sub["gpu_ops"],
    "cpu_partitions": sub["cpu_partitions"],
}
(out / "model_info.json").write_text(json.dumps(info, indent=2) + "\n")

shared = Path(os.environ.get("ALBERT_EDGE_SHARED", repo.parent / "shared"))
dev = shared / "data" / "sst2" / "dev.tsv"
if dev.is_file():
    from albert_edge.data import read_sst2

    sentences = [s for _, s in read_sst2(dev)][:128]
else:
    from albert_edge.bench.inputs import FALLBACK_SENTENCES

    print(f"note: {dev} not found; benchmarking on built-in sentences", file=sys.stderr)
    sentences = list(FALLBACK_SENTENCES)
(out / "bench_sentences.txt").write_text("\n".join(s.replace("\n", " ") for s in sentences) + "\n")
print(f"labels {labels}, sequence lengths {seq_lens}, {len(sentences)} benchmark sentences")
PY

for f in model.tflite model_gpu.tflite spiece.model model_info.json bench_sentences.txt; do
    mv -f "$tmp/$f" "$assets/$f"
done
echo "assets ready in $assets:"
ls -l "$assets"
