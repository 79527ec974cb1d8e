#!/usr/bin/env bash
# GPU runner: build the CUDA module on the GPU machine, run the test suite there (CUDA and
# Triton paths for real, no interpreter), then every GPU benchmark script. Prints markdown
# tables to stdout and writes them under ${OUT:-benchmarks/gpu/out}.
# The device image has torch, triton, CuPy, pybind11, scikit-build-core; no registry access, so:
#   pip install --no-build-isolation --no-deps .
set -euo pipefail
cd "$(dirname "$0")/../.."
OUTDIR="${OUT:-benchmarks/gpu/out}"
mkdir -p "$OUTDIR"
unset TRITON_INTERPRET
export XMEM_CUDA=ON CMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}"
python -m pip install -q --no-build-isolation --no-deps . 2>&1 | tail -n 5
cd "$OUTDIR"  # import the installed package, not the source tree
python -m xmemory_gpu backends | tee backends.txt
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee device.txt
ROOT="$(cd - >/dev/null && pwd)"
python -m pytest -q -x "$ROOT/tests/ops" -p no:cacheprovider 2>&1 | tail -n 30 | tee tests.txt
for script in "$ROOT"/benchmarks/gpu/bench_*_gpu.py; do
  name="$(basename "$script" .py)"
  echo "## $name"
  python "$script" "$@" 2>&1 | tee "$name.md"
done
echo "## bench_entropy_gpu (pytest-benchmark)"
python -m pytest -q -s "$ROOT/benchmarks/gpu/bench_entropy_gpu.py" -p no:cacheprovider \
  --benchmark-columns=median,min,max,rounds 2>&1 | tail -n 40 | tee bench_entropy_gpu.pytest.txt
