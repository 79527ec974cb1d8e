#!/usr/bin/env bash
# One-command GPU validation on a GPU machine (no registry; Python 3.12, torch and triton installed):
#   1. build the C++ and CUDA modules into the machine's Python (pip install --no-build-isolation --no-deps .)
#   2. run every GPU test (tests/ops, compiled Triton and CUDA for real; tests/test_device_pipeline.py,
#      the build, Retriever and engine on device-resident arrays, which needs pydantic: carry its wheels,
#      see the device tool's README, or it is reported skipped) with a junit report
#   3. benchmarks/gpu/validate.py: each op's GPU paths checked against the float64 reference on fresh
#      random inputs, timed against torch baselines and the roofline floor (bytes and FLOPs counted
#      over this device's measured copy and matmul peaks), and the validated-backends entries
# Writes to $OUT (the device tool's folder) or benchmarks/gpu/out: results.md (a block for
# RESULTS.md), results.json (fold it in with `python -m xmemory_gpu.ops.validated --merge results.json`),
# tests.xml, tests.txt, build.txt, device.txt.
#
#   XMEM_COMMIT=$(git rev-parse HEAD) ...   # name the commit when the copy has no .git (the device tool's)
#   bash benchmarks/gpu/run.sh              # on the GPU machine (about 6-8 minutes)
#   bash benchmarks/gpu/run.sh --dry-run    # here, on a CPU: same steps, Triton interpreter, tiny sizes,
#                                           # no build, no CUDA launches (CI runs this)
# Options: --skip-build (module already installed), --skip-tests, --ops knn,objective,coverage,entropy,
#          --workers N (pytest-xdist processes for the GPU tests: the Triton compiles run in parallel)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
DRY=0; BUILD=1; TESTS=1; OPS="knn,objective,coverage,entropy"; WORKERS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --skip-build) BUILD=0 ;;
    --skip-tests) TESTS=0 ;;
    --ops) OPS="$2"; shift ;;
    --workers) WORKERS="$2"; shift ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
OUTDIR="${OUT:-$ROOT/benchmarks/gpu/out}"
[ "$DRY" = 1 ] && [ -z "${OUT:-}" ] && OUTDIR="${XMEM_DRY_OUT:-$(mktemp -d -t xmem-gpu-dry-XXXXXX)}"
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PY="${PYTHON:-}"
[ -z "$PY" ] && { [ -n "${VIRTUAL_ENV:-}" ] && PY=python || PY=python3; }
t0=$(date +%s)
stamp() { echo "[run.sh +$(( $(date +%s) - t0 ))s] $*"; }

if [ "$DRY" = 1 ]; then
  export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""   # CPU only: the interpreter, no CUDA launch
  echo "dry run on $(uname -m), $($PY --version 2>&1)" > "$OUTDIR/device.txt"
  PYTEST_ARGS=("$ROOT/tests/ops/test_dispatch.py" -k "validated or resolve or surface")
else
  unset TRITON_INTERPRET
  export PATH="$PATH:/usr/local/cuda/bin"   # CMake finds nvcc on PATH only
  # CMake reads the architectures from CUDAARCHS (an environment CMAKE_CUDA_ARCHITECTURES is ignored)
  export XMEM_CUDA=ON CUDAARCHS="${CUDAARCHS:-90}" XMEM_NATIVE=OFF
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-16}"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv \
    | tee "$OUTDIR/device.txt" || true
  PYTEST_ARGS=("$ROOT/tests/ops" "$ROOT/tests/test_device_pipeline.py" -k "not run_sh_dry_run")
fi
[ "$WORKERS" -gt 0 ] && PYTEST_ARGS+=(-n "$WORKERS")

if [ "$BUILD" = 1 ] && [ "$DRY" = 0 ]; then
  stamp "building the C++ and CUDA modules"
  $PY -m pip install --no-build-isolation --no-deps . > "$OUTDIR/build.txt" 2>&1 || { tail -n 40 "$OUTDIR/build.txt"; exit 1; }
  tail -n 3 "$OUTDIR/build.txt"
fi

# import the installed package, not the source tree (its compiled modules live in site-packages);
# the dry run uses the environment's own install (editable here)
cd "$OUTDIR"
$PY -c "import argparse, sys; from xmemory_gpu.cli.backends import run; sys.exit(run(argparse.Namespace(json=False)))" \
  | tee backends.txt  # (the CLI entry point imports pydantic, absent on the GPU image)

SUMMARY="not run"
JUNIT=()
if [ "$TESTS" = 1 ]; then
  stamp "GPU tests: ${PYTEST_ARGS[*]}"
  set +e
  $PY -m pytest -q -p no:cacheprovider --junitxml="$OUTDIR/tests.xml" -o junit_family=xunit1 \
    "${PYTEST_ARGS[@]}" > "$OUTDIR/tests.txt" 2>&1
  rc=$?
  set -e
  tail -n 25 "$OUTDIR/tests.txt"
  SUMMARY="$(grep -E '(passed|failed|error)' "$OUTDIR/tests.txt" | tail -n 1 | sed 's/=//g; s/^ *//; s/ *$//')"
  [ -z "$SUMMARY" ] && SUMMARY="pytest exit $rc"
  JUNIT=(--junit "$OUTDIR/tests.xml")
fi

stamp "checks and benchmarks ($OPS)"
VARGS=(--out "$OUTDIR" --ops "$OPS" --pytest-summary "$SUMMARY" "${JUNIT[@]}")
[ "$DRY" = 1 ] && VARGS+=(--dry-run)
set +e
$PY "$ROOT/benchmarks/gpu/validate.py" "${VARGS[@]}" 2>&1 | tee "$OUTDIR/validate.txt"
rc=${PIPESTATUS[0]}
set -e
stamp "done: $OUTDIR/results.md, $OUTDIR/results.json (exit $rc)"
exit "$rc"
