#!/usr/bin/env bash
# PyTorch on CUDA, the GPU backends `albert-edge bench` has (torch-cuda-fp32, torch-cuda-fp16),
# on the embedded SST-2 model and a random-init albert-base, interleaved (--rounds).
#
#   bash benchmarks/gpu_torch.sh OUT_DIR [WHEEL_DIR]
#
# Run on a machine with a CUDA build of torch. WHEEL_DIR (optional) holds wheels to install
# first into a private folder, for a machine whose transformers / huggingface_hub are not
# versions this project supports and that cannot reach PyPI (the workplace's GPU machines:
# transformers 5 there; the wheels are transformers 4.57.6, tokenizers, huggingface_hub).
# BACKENDS overrides the backends (e.g. BACKENDS=torch-fp32 to dry-run it on a CPU).
# Writes OUT_DIR/gpu_torch.json and .md, the machine facts in OUT_DIR/gpu_machine.txt.
set -euo pipefail
out=${1:?usage: gpu_torch.sh OUT_DIR [WHEEL_DIR]}
wheels=${2:-}
mkdir -p "$out"
py=${PYTHON:-python3}
source "$(dirname "$0")/gpu_env.sh"
gpu_wheels "$py" "$wheels"
gpu_machine "$py" | tee "$out/gpu_machine.txt"
base=$(mktemp -d)/albert-base
"$py" -c "from albert_edge.configs import make_random_checkpoint as m; m('$base', 'albert-base', seed=0, spiece_model='albert_edge/models/sst2-albert-tiny/spiece.model')"
read -r -a backends <<< "${BACKENDS:-torch-cuda-fp32 torch-cuda-fp16}"
args=()
for b in "${backends[@]}"; do args+=(--backend "$b"); done
"$py" -m albert_edge.cli bench albert_edge/models/sst2-albert-tiny "$base" "${args[@]}" \
    --batch 1,32 --seq-lens 32,128 --runs "${RUNS:-60}" --rounds "${ROUNDS:-3}" \
    --json "$out/gpu_torch.json" --markdown "$out/gpu_torch.md"
