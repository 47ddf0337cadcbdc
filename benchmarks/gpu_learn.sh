#!/usr/bin/env bash
# Learning on CUDA: `albert-edge train --init` of the embedded model with each --amp
# (bf16 autocast, fp16 autocast + GradScaler, none), then the deep teacher's masked-LM
# pretraining and fine-tune (`python -m benchmarks.deep_teacher ... --device cuda`), the
# recipe of benchmarks/results/learn.md run longer than one CPU thread allows.
#
#   bash benchmarks/gpu_learn.sh OUT_DIR [WHEEL_DIR]
#
# Needs SST-2 and the ALBERT SentencePiece model under $ALBERT_EDGE_SHARED (default
# ../shared): data/sst2/{train,dev}.tsv and data/albert/30k-clean.model. WHEEL_DIR as in
# benchmarks/gpu_torch.sh (transformers 4.57.6 and friends for a machine whose own
# transformers is 5.x and which cannot reach PyPI). DEVICE=cpu with small PRE_STEPS /
# FT_ROWS dry-runs it on a CPU. Each stage's failure is logged and the next stage still runs;
# the pretraining stops and saves at PRE_MINUTES (its record says so). AMPS="" skips the
# train --amp runs. FT_LRS="1e-4 2e-4" fine-tunes one teacher per learning rate, side by
# side on the one GPU (FT_EPOCHS, FT_BATCH, TEACHER_ROWS; each stopped at FT_SECONDS).
# Writes OUT_DIR/gpu_learn_machine.txt, train_AMP.json (each run's training.json) and
# pretraining.json and deep_teacher.tar.gz (the teacher directory and its record; with
# several FT_LRS, deep_teacher_lrLR.tar.gz each).
set -uo pipefail
out=${1:?usage: gpu_learn.sh OUT_DIR [WHEEL_DIR]}
wheels=${2:-}
mkdir -p "$out"
py=${PYTHON:-python3}
source "$(dirname "$0")/gpu_env.sh"
gpu_wheels "$py" "$wheels" || exit 1
export PYTHONUNBUFFERED=1
shared=${ALBERT_EDGE_SHARED:-$(pwd)/../shared}
export ALBERT_EDGE_SHARED=$shared
device=${DEVICE:-cuda}
work=$(mktemp -d)
gpu_machine "$py" | tee "$out/gpu_learn_machine.txt"
for amp in ${AMPS-bf16 fp16 none}; do
    t0=$(date +%s)
    if "$py" -m albert_edge.cli train --init albert_edge/models/sst2-albert-tiny \
        --train "$shared/data/sst2/train.tsv" --dev "$shared/data/sst2/dev.tsv" \
        -o "$work/ft-$amp" --device "$device" --amp "$amp" --epochs 1 \
        --max-train-rows "${FT_ROWS:-8000}" --threads 4 -q; then
        cp "$work/ft-$amp/training.json" "$out/train_$amp.json"
        echo "train --amp $amp: ok in $(($(date +%s) - t0)) s"
    else
        echo "train --amp $amp: FAILED (rc $?) after $(($(date +%s) - t0)) s"
    fi
done
"$py" -m benchmarks.deep_teacher pretrain -o "$work/pre" --device "$device" \
    --steps "${PRE_STEPS:-20000}" --batch "${PRE_BATCH:-128}" --lr "${PRE_LR:-5e-4}" \
    --max-minutes "${PRE_MINUTES:-4.5}" --log-every 1000 --save-every 2500 --threads 4 \
    || echo "pretrain: FAILED (rc $?)"
if [[ -f "$work/pre/pretraining.json" ]]; then
    lrs=(${FT_LRS:-1e-4})
    for lr in "${lrs[@]}"; do
        timeout "${FT_SECONDS:-600}" "$py" -m benchmarks.deep_teacher finetune \
            --pretrained "$work/pre" -o "$work/t-$lr" --device "$device" \
            --rows "${TEACHER_ROWS:-20000}" --epochs "${FT_EPOCHS:-2}" \
            --batch "${FT_BATCH:-32}" --lr "$lr" --threads 4 \
            > "$out/finetune_lr$lr.log" 2>&1 || echo "finetune lr $lr: FAILED (rc $?)" &
    done
    wait
    # the teacher(s) and both records (the pretrained weights themselves stay behind: 16 MiB a file)
    cp "$work/pre/pretraining.json" "$out/pretraining.json"
    for lr in "${lrs[@]}"; do
        name=deep_teacher.tar.gz
        (( ${#lrs[@]} > 1 )) && name=deep_teacher_lr$lr.tar.gz
        if [[ -d "$work/t-$lr" ]]; then
            rm -rf "$work/t" && cp -r "$work/t-$lr" "$work/t" && tar -C "$work" -czf "$out/$name" t
        fi
    done
fi
ls -la "$out"
