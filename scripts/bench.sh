#!/usr/bin/env bash
# Run the pytest-benchmark suites on small built-in inputs and print their tables: a synthetic store
# (`xmemory synth`, default embedder, built here) stands in for a LoCoMo store, and every suite runs at
# XMEM_BENCH_SCALE (default 0.05) of the sizes RESULTS reports. A first look on any machine; for the
# figures in benchmarks/RESULTS.md run a suite at full scale as its docstring says.
# Extra arguments go to pytest (e.g. `bash scripts/bench.sh benchmarks/bench_knn.py`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${XMEM_VENV:-.venv}"
# install (scripts/setup.sh dev) unless the environment already has the package and pytest-benchmark
"$VENV/bin/python" -c "import xmemory_gpu, pytest_benchmark" 2>/dev/null || bash scripts/setup.sh dev >/dev/null
. "$VENV/bin/activate"
export HF_HUB_OFFLINE=1
export XMEM_BENCH_SCALE="${XMEM_BENCH_SCALE:-0.05}"
export XMEM_BENCH_MEMORIES="${XMEM_BENCH_MEMORIES:-20}" XMEM_BENCH_ROUNDS="${XMEM_BENCH_ROUNDS:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building a small synthetic store in $work (default embedder) ..."
xmemory synth --conversations 4 --seed 0 --out "$work/chats.json" >/dev/null
xmemory build "$work/chats.json" --out "$work/store" --no-progress >/dev/null
export XMEM_STORE="$work/store" XMEM_LOCOMO="$work/chats.json"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(benchmarks --ignore=benchmarks/bench_ray_build.py)  # Ray starts a cluster: run it alone
fi
python -m pytest -p no:cacheprovider -q --benchmark-columns=min,median,rounds --benchmark-sort=name \
  "${targets[@]}"
