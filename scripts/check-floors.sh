#!/usr/bin/env bash
# Install xmine with every dependency at the floor pyproject.toml states (scripts/floors.txt) into
# a separate virtual environment and run the test suite there (Ray's tests skip: no `ray` extra).
# usage: bash scripts/check-floors.sh [VENV]   (default .venv-floors)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${1:-.venv-floors}
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "${XMINE_TORCH_SPEC:-torch==2.13.0}"
"$VENV/bin/python" -m pip install -q -c scripts/floors.txt -e ".[dev,split]"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" -m pytest -q tests
