#!/usr/bin/env bash
# Builds the question-answering screen's assets from an ALBERT question-answering
# checkpoint (AlbertForQuestionAnswering, e.g. `albert-edge train` on SQuAD) and copies
# them into app/src/main/assets/ (git-ignored, beside the sentiment model's):
#
#   albert-edge convert CHECKPOINT --to tflite --precision int8-dynamic \
#       --seq-lens $ALBERT_EDGE_QA_SEQ_LENS -o <work dir>
#
# then qa_model.tflite, qa_spiece.model and qa_model_info.json (artifact name, precision,
# the sequence lengths of its seq_<N> signatures; the app cuts contexts into windows of
# the largest and decodes spans with albert-core's SpanDecoder).
#
# Usage (from anywhere, with albert-edge installed, e.g. the repository's .venv active):
#   android_demo/scripts/prepare_qa_assets.sh path/to/qa-checkpoint
# Environment: ALBERT_EDGE (the command, default albert-edge), PYTHON (default python3),
# ALBERT_EDGE_QA_SEQ_LENS (default 128,256,384; at most the model's max_position_embeddings).
set -euo pipefail

demo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
assets="$demo/app/src/main/assets"
albert_edge="${ALBERT_EDGE:-albert-edge}"
python="${PYTHON:-python3}"
seq_lens="${ALBERT_EDGE_QA_SEQ_LENS:-128,256,384}"

if [ "$#" -ne 1 ]; then
    echo "usage: $0 QA_CHECKPOINT (an AlbertForQuestionAnswering checkpoint directory)" >&2
    exit 2
fi
if ! command -v "$albert_edge" >/dev/null 2>&1; then
    echo "$albert_edge not found: activate the repository's virtualenv (. .venv/bin/activate)" >&2
    exit 2
fi
# the head is judged before anything converts
arch="$("$python" -c 'import json,sys; print((json.load(open(sys.argv[1])).get("architectures") or ["?"])[0])' "$1/config.json" 2>/dev/null || echo "?")"
if [ "$arch" != "AlbertForQuestionAnswering" ]; then
    echo "$1/config.json: architectures is $arch; the question-answering screen needs an AlbertForQuestionAnswering checkpoint" >&2
    exit 2
fi

name="$(basename "${1%/}")"
work="$demo/build/$name.qa-tflite-int8-dynamic"
mkdir -p "$demo/build"
"$albert_edge" convert "$1" --to tflite --precision int8-dynamic --seq-lens "$seq_lens" \
    -o "$work" --overwrite

for f in model.tflite spiece.model manifest.json; do
    if [ ! -f "$work/$f" ]; then
        echo "$work/$f is missing: the conversion did not produce a complete artifact" >&2
        exit 1
    fi
done

mkdir -p "$assets"
tmp="$(mktemp -d "$assets/.prepare-qa.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$work/model.tflite" "$tmp/qa_model.tflite"
cp "$work/spiece.model" "$tmp/qa_spiece.model"
ALBERT_EDGE_WORK="$work" ALBERT_EDGE_OUT="$tmp" ALBERT_EDGE_SEQ_LENS="$seq_lens" "$python" - <<'PY'
import json
import os
from pathlib import Path

work = Path(os.environ["ALBERT_EDGE_WORK"])
manifest = json.loads((work / "manifest.json").read_text())
seq_lens = sorted(
    {int(s["seq_len"]) for s in manifest.get("signatures", []) if s.get("seq_len")}
    or {int(x) for x in os.environ["ALBERT_EDGE_SEQ_LENS"].split(",")}
)
info = {
    "artifact": work.name,
    "head": manifest.get("head"),
    "precision": manifest.get("precision", "int8-dynamic"),
    "seq_lens": seq_lens,
    "file_bytes": manifest.get("sizes", {}).get("file_bytes"),
}
(Path(os.environ["ALBERT_EDGE_OUT"]) / "qa_model_info.json").write_text(json.dumps(info, indent=2) + "\n")
print(f"question answering: sequence lengths {seq_lens}")
PY

for f in qa_model.tflite qa_spiece.model qa_model_info.json; do
    mv -f "$tmp/$f" "$assets/$f"
done
echo "question-answering assets ready in $assets:"
ls -l "$assets"/qa_*
