# Sourced by the GPU scripts (benchmarks/gpu_torch.sh, benchmarks/gpu_learn.sh): the
# set-up they share, written once.
#
# gpu_wheels PY WHEEL_DIR: with a WHEEL_DIR, install its wheels into a private folder put
#   first on PYTHONPATH (a machine whose transformers / huggingface_hub are not versions
#   this project supports and that cannot reach PyPI); then the repository itself on
#   PYTHONPATH. Returns non-zero when the install fails.
# gpu_machine PY: the machine facts on stdout (date, GPU, CPU, python / torch / CUDA /
#   transformers versions).

gpu_wheels() {
    local py=$1 wheels=${2:-} site
    if [[ -n "$wheels" ]]; then
        site=$(mktemp -d)
        "$py" -m pip install -q --no-deps --no-index --no-compile --target "$site" "$wheels"/*.whl || return 1
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
}

gpu_machine() {
    local py=$1
    date -u +%Y-%m-%dT%H:%MZ
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    grep -m1 'model name' /proc/cpuinfo || true
    "$py" -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
}
