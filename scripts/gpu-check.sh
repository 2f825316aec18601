#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: set up (CUDA torch, faiss-gpu), then run every GPU path of xmine
# (CUDA encoder, the cuda exact product, faiss-gpu flat and IVF, Ray with a GPU) against its CPU
# result and print the timings (benchmarks/lab/gpu_check.py). Exit 1 if a GPU result differs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/python benchmarks/lab/run.py gpu-check "$@"
