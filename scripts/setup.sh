#!/usr/bin/env bash
# Set up xmine in ./.venv (idempotent: a second run only checks). Sourced by demo.sh and test.sh.
#
# torch: a plain `torch` requirement pulls a multi-GB CUDA build on a CPU-only machine. So on a
# machine without an NVIDIA GPU we ask for torch==2.13.0, which this project's CPU machines serve
# from a local CPU wheel (elsewhere pip fetches that release from PyPI, which also works); with a
# GPU we let pip choose the CUDA build and install faiss-gpu in place of faiss-cpu.
# Override with XMINE_TORCH_SPEC (e.g. "torch==2.5.1").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=${PYTHON:-python3}
VENV=${XMINE_VENV:-.venv}
STAMP="$VENV/.xmine-installed"

if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
pip_q() { "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v "^WARNING: Location" || true; }

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then has_gpu=1; fi

# The extras installed: dev (pytest), ray (`--ray`; the tests run on a local Ray cluster) and split
# (`--split-sentences`).
EXTRAS="dev,ray,split"
# Re-install when pyproject.toml or the extras changed since the last successful set-up.
want="$(sha256sum pyproject.toml | cut -c1-16)-$EXTRAS-gpu$has_gpu"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    exit 0
fi

if ! "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    if [ "$has_gpu" = 1 ]; then spec=${XMINE_TORCH_SPEC:-torch}; else spec=${XMINE_TORCH_SPEC:-torch==2.13.0}; fi
    echo "[setup] installing $spec" >&2
    pip_q "$spec"
fi
echo "[setup] installing xmine and its dependencies" >&2
pip_q -e ".[$EXTRAS]"
"$VENV/bin/python" -c "import xmine.mining, torch, faiss, sentence_transformers, ray" \
    || { echo "[setup] install failed (see pip output above)" >&2; exit 1; }
if [ "$has_gpu" = 1 ]; then
    echo "[setup] NVIDIA GPU found: replacing faiss-cpu with faiss-gpu" >&2
    "$VENV/bin/python" -m pip uninstall -q -y faiss-cpu || true
    # With its dependencies: the faiss-gpu wheel links the CUDA 12 runtime and cuBLAS wheels
    # (nvidia-*-cu12), which a torch built for another CUDA does not bring.
    pip_q "faiss-gpu>=1.8"
    "$VENV/bin/python" -c "import faiss, sys; sys.exit(faiss.get_num_gpus() < 1)" \
        || { echo "[setup] faiss-gpu was installed but sees no GPU (see pip output above); pip install faiss-cpu to mine on the CPU" >&2; exit 1; }
fi
echo "$want" > "$STAMP"
echo "[setup] done: $VENV/bin/xmine" >&2
