"""``ops.dedup.dedup_block``: its input checks, and the contract every backend shares (thresholds
taken as Python floats, an empty block, NumPy rows of another dtype)."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.ops import available_backends
from xmemory_gpu.ops.dedup import dedup_block

BACKENDS = ["reference"] + (["cpu"] if available_backends()["cpu"].available else [])


def _block(m: int = 5, d: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows = np.ones((m, d), np.float32) / np.sqrt(d, dtype=np.float32)  # identical rows
    return rows @ rows.T, rows, np.full(m, -np.inf), np.full(m, -1, np.int64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_identical_rows_merge_into_the_first_kept(backend):
    inner, rows, best, arg = _block()
    assert dedup_block(inner, rows, best, arg, 0.9, 7, backend=backend).tolist() == [-1, 7, 7, 7, 7]
    assert dedup_block(inner[:0, :0], rows[:0], best[:0], arg[:0], 0.9, 0, backend=backend).tolist() == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("threshold", [np.float32(0.9), np.float64(0.9), 0.9])
def test_a_numpy_threshold_decides_as_its_python_float(backend, threshold):
    inner, rows, best, arg = _block()
    best[3], arg[3] = 0.95, 2
    want = dedup_block(inner, rows, best, arg, float(threshold), 0, backend="reference")
    assert dedup_block(inner, rows, best, arg, threshold, 0, backend=backend).tolist() == want.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_float64_rows_run_the_same_rule(backend):
    inner, rows, best, arg = _block()
    rows64 = rows.astype(np.float64)
    got = dedup_block(rows64 @ rows64.T, rows64, best, arg, 0.9, 0, backend=backend)
    assert got.tolist() == [-1, 0, 0, 0, 0]


@pytest.mark.parametrize(
    "bad, field",
    [
        (lambda i, r, b, a: (i, r[0], b, a), "rows"),
        (lambda i, r, b, a: (i[:, :2], r, b, a), "inner"),
        (lambda i, r, b, a: (i, r, b[:2], a), "best"),
        (lambda i, r, b, a: (i, r, b, a[:, None]), "arg"),
    ],
)
def test_bad_shapes_name_the_argument(bad, field):
    inner, rows, best, arg = bad(*_block())
    with pytest.raises(ValueError, match=f"^{field}: expected"):
        dedup_block(inner, rows, best, arg, 0.9, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_screen_is_float64_at_the_candidate_floor(backend):
    """The candidates of an exact re-score are the gram entries (float32, widened) at or above the
    row's best entry less tie_tol in float64: an entry on that floor is scored (row 2 merges into the
    copy it holds), the float32 just below it is not (row 2 is kept), on every backend."""
    rows = np.float32([[1.0, 0.0], [0.96, 0.28], [0.96, 0.28]])
    top = np.float32(0.99)
    floor = float(top) - 1e-4
    at = np.float32(floor)
    if float(at) < floor:
        at = np.nextafter(at, np.float32(np.inf))
    below = np.nextafter(at, np.float32(-np.inf))
    for entry, want in ((at, 101), (below, -1)):
        inner = np.zeros((3, 3), np.float32)
        inner[2, 0], inner[2, 1] = top, entry
        got = dedup_block(inner, rows, np.full(3, -np.inf), np.full(3, -1), 0.97, 100, backend=backend)
        assert got.tolist() == [-1, -1, want], (float(entry), floor)
