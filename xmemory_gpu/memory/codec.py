"""One memory's columns as bytes and back: the store's file format and the Ray build's wire format.

A :class:`~.bank.MemorySlice` becomes one flat container of plain arrays (:func:`pack_arrays`):
the magic ``XMSLICE1``, a little-endian u64 header length, a JSON header naming each array's
dtype (numeric only: float32/64, int32/64, uint8), shape and offset, then the arrays' raw bytes,
each 64-byte aligned. Reading is one ``json.loads`` and a view per array: nothing is unpickled or
evaluated. A numeric column is stored as ``LEVEL.NAME``; a text column as its UTF-8 bytes
(``LEVEL.NAME.utf8``) and offsets (``LEVEL.NAME.off``, int64 [n + 1]). The theme columns derived
from the statements (``sum``, ``count``, ``x``: :func:`theme_columns`) are not written; reading
computes them again, in float64. Files of format 3 (before the passages level) have no ``msg.psg``
and ``psg.*`` columns: :func:`slice_from_bytes` reads them as "no passages stored" (``msg.psg``
all ``-1``), and a search embeds such a memory's long messages' passages itself. :func:`check_slice` is what a reader runs on bytes it did not
write itself: every column present with its dtype and shape, row references inside their level,
finite embeddings. The store's delta files (``memory/deltas.py``: the rows a commit changed) are
containers too, applied to a base file's arrays before :func:`slice_from_arrays` reads them.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ops import columns
from ..ops.columns import MAGIC, aligned
from ..ops.rows import add_rows_in_order
from .bank import COLUMNS, DERIVED, LEVELS, ROW_REFS, MemorySlice
from .engine_state import KEY as ENGINE_KEY

# timestamps are POSIX seconds of years 1-9999 (what datetime can represent), NaN for unknown
MIN_TIME = -62135596800.0  # 0001-01-01T00:00:00Z
MAX_TIME = 253402300800.0  # 10000-01-01T00:00:00Z (exclusive)
TIME_COLUMNS = (("msg", "time"), ("epi", "start"), ("epi", "end"), ("sem", "time"))


RAGGED = tuple((lv, name) for lv in LEVELS for name, (_, kind) in COLUMNS[lv].items() if kind == "w")
FORMAT = 4  # the file layout this module writes
SINCE_4 = {("msg", "psg"), ("psg", "x"), ("psg", "msg")}  # columns format 3 files lack


class SliceFormatError(ValueError):
    """Bytes that are not a memory's columns, or columns that break the bank's layout; says which."""


def theme_columns(sem_x: np.ndarray, theme_of: np.ndarray, n_themes: int) -> dict[str, np.ndarray]:
    """A memory's theme ``sum`` [K, d] float32 (accumulated in float64), ``count`` [K] int32 and
    unit-norm ``x`` [K, d] float32 (zero rows for empty themes) from its statements' embeddings
    ``sem_x`` [n, d] and theme rows ``theme_of`` [n]."""
    sums = np.zeros((n_themes, sem_x.shape[1]), np.float64)
    add_rows_in_order(sums, theme_of, sem_x, np.arange(len(theme_of)))
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return {
        "sum": sums.astype(np.float32),
        "count": np.bincount(theme_of, minlength=n_themes).astype(np.int32),
        "x": np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0).astype(np.float32),
    }


def theme_columns_from(
    old: dict[str, np.ndarray], old_rows: np.ndarray, sem_x: np.ndarray, theme_of: np.ndarray, n_themes: int
) -> dict[str, np.ndarray]:
    """``theme_columns`` of a memory whose theme k, where ``old_rows [K] >= 0``, has the members that
    row ``old_rows[k]`` of the ``old`` theme columns had, on the same statement rows: its columns are
    taken from there (they are a function of its members' rows, summed in ascending order); the other
    themes' are computed from their members only."""
    theme_of = np.asarray(theme_of, np.int64)
    old_rows = np.asarray(old_rows, np.int64)
    redo = np.flatnonzero(old_rows < 0)
    if len(redo) == n_themes:
        return theme_columns(sem_x, theme_of, n_themes)
    local = np.full(n_themes, -1, np.int64)
    local[redo] = np.arange(len(redo))
    rows = np.flatnonzero(local[theme_of] >= 0)  # the changed themes' members, ascending
    part = theme_columns(sem_x[rows], local[theme_of[rows]], len(redo))
    take = np.flatnonzero(old_rows >= 0)
    out = {}
    for name, col in part.items():
        full = np.empty((n_themes, *col.shape[1:]), col.dtype)
        full[redo] = col
        full[take] = np.asarray(old[name], col.dtype)[old_rows[take]]
        out[name] = full
    return out


def pack_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    """Named numeric arrays as one container (see the module docstring; ``ops.columns``: one C++
    call when the compiled module is built); each array's bytes are copied once, into the container."""
    try:
        return columns.pack_arrays(list(arrays), list(arrays.values()))
    except columns.ColumnsError as exc:
        raise SliceFormatError(str(exc)) from None


def unpack_arrays(
    data: bytes | bytearray, where: str = "container", *, own: bool = False
) -> dict[str, np.ndarray]:
    """The arrays of a container, as writable arrays over one copy of ``data`` (over ``data`` itself
    when ``own`` and it is a ``bytearray`` the caller gives up: a file just read); a container that is
    cut, malformed or names another dtype raises ``SliceFormatError``."""
    if len(data) < 16 or bytes(data[:8]) != MAGIC:
        raise SliceFormatError(f"{where}: not a memory's columns (no {MAGIC.decode()} header)")
    (n,) = struct.unpack_from("<Q", data, 8)
    if n > len(data) - 16:
        raise SliceFormatError(f"{where}: the header is cut")
    try:
        entries = json.loads(bytes(data[16 : 16 + n]))["arrays"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise SliceFormatError(f"{where}: the header is not valid ({type(exc).__name__})") from None
    try:
        buf = data if own and isinstance(data, bytearray) else bytearray(data)
        return columns.container_views(entries, buf, aligned(16 + n))
    except columns.ColumnsError as exc:
        raise SliceFormatError(f"{where}: {exc}") from None


def slice_arrays(sl: MemorySlice) -> dict[str, np.ndarray]:
    """Memory ``sl``'s stored columns as the container's named arrays (text as UTF-8 bytes and offsets)."""
    arrays: dict[str, np.ndarray] = {}
    for lv in LEVELS:
        for name, a in sl.cols[lv].items():
            if lv == "theme" and name in DERIVED:
                continue
            if a.dtype.kind == "O":
                arrays[f"{lv}.{name}.utf8"], arrays[f"{lv}.{name}.off"] = columns.join_utf8(a.tolist())
            else:
                arrays[f"{lv}.{name}"] = a
    return arrays


def slice_to_bytes(sl: MemorySlice) -> bytes:
    """Memory ``sl``'s columns as one container (see the module docstring)."""
    return pack_arrays(slice_arrays(sl))


def slice_pieces(sl: MemorySlice, dim: int, *, checked: bool = False) -> tuple[list[memoryview], int]:
    """:func:`slice_to_bytes`'s bytes in consecutive pieces over the slice's own buffers, and their
    length (``columns.container_pieces``: a writer streams them to the file, hashing them on the way,
    with no copy of the memory), after the checks of :func:`encode_checked`."""
    _check_for(sl, dim, checked)
    arrays = slice_arrays(sl)
    try:
        return columns.container_pieces(list(arrays), list(arrays.values()))
    except columns.ColumnsError as exc:
        raise SliceFormatError(str(exc)) from None


def _check_for(sl: MemorySlice, dim: int, checked: bool) -> None:
    d = sl.cols["msg"]["x"].shape[-1]
    if d != dim:
        raise SliceFormatError(f"memory {sl.memory_id}: dim {d} != store dim {dim}")
    if not checked:
        check_slice(sl, dim)


def encode_checked(sl: MemorySlice, dim: int, *, checked: bool = False) -> tuple[bytes, str]:
    """What a backend writes for a memory: its bytes (:func:`slice_to_bytes`) and their sha256,
    after :func:`check_slice` (``SliceFormatError`` for a slice of another dimension or broken;
    ``checked``: the caller ran it on this slice already)."""
    _check_for(sl, dim, checked)
    data = slice_to_bytes(sl)
    return data, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class EncodedSlice:
    """A memory encoded elsewhere (a build worker, :func:`encode_slice`), committed without encoding
    it again: the file's ``data``, its ``sha256`` and embedding ``dim``, the catalogue's ``stats``
    (:func:`catalogue_stats`), rows per level and the message ids the catalogue indexes."""

    memory_id: str
    data: bytes
    sha256: str
    dim: int
    stats: dict[str, Any]
    counts: dict[str, int]
    message_ids: list[str]

    def verify(self, dim: int) -> None:
        """``SliceFormatError`` unless the memory was encoded for ``dim`` and its bytes are the ones
        hashed (checked where it is committed: it may have crossed a pipe or a network)."""
        if self.dim != dim:
            raise SliceFormatError(f"memory {self.memory_id}: dim {self.dim} != store dim {dim}")
        if hashlib.sha256(self.data).hexdigest() != self.sha256:
            raise SliceFormatError(
                f"memory {self.memory_id}: its bytes do not match their sha256 (damaged on the way)"
            )


def encode_slice(sl: MemorySlice, dim: int, *, checked: bool = False) -> EncodedSlice:
    """Memory ``sl`` checked and encoded (:func:`encode_checked`) with what its catalogue rows hold."""
    return encoded_as(sl, dim, *encode_checked(sl, dim, checked=checked))


def encoded_as(sl: MemorySlice, dim: int, data: bytes, digest: str) -> EncodedSlice:
    """Memory ``sl`` as an ``EncodedSlice`` of ``data`` and ``digest`` with what its catalogue rows
    hold (a streamed file: no bytes here, its digest known once written)."""
    return EncodedSlice(
        sl.memory_id,
        data,
        digest,
        dim,
        catalogue_stats(sl),
        {lv: sl.n(lv) for lv in LEVELS},
        [str(i) for i in sl.cols["msg"]["id"].tolist()],
    )


def _texts(raw: bytes, off: np.ndarray, where: str) -> np.ndarray:
    try:
        return columns.split_utf8(raw, off)
    except UnicodeDecodeError as exc:
        raise SliceFormatError(f"{where}: not UTF-8 ({exc.reason})") from None
    except columns.ColumnsError:
        raise SliceFormatError(f"{where}: offsets do not cut its {len(raw)} bytes") from None


def catalogue_stats(sl: MemorySlice) -> dict[str, Any]:
    """The stats a catalogue (or the Ray build's table) keeps for ``sl``: its stats plus its
    engine state under ``engine`` (``MemorySlice`` types it again when read)."""
    return dict(sl.stats) if sl.engine is None else {**sl.stats, ENGINE_KEY: sl.engine.as_dict()}


def slice_from_bytes(
    memory_id: str, data: bytes | bytearray, stats: dict[str, Any], fmt: int = FORMAT, *, own: bool = False
) -> MemorySlice:
    """The inverse of :func:`slice_to_bytes`; every column of the bank's layout for file format
    ``fmt`` must be present with its dtype (``SliceFormatError`` names the first that is not).
    ``own``: as :func:`unpack_arrays`'."""
    return slice_from_arrays(memory_id, unpack_arrays(data, f"memory {memory_id}", own=own), stats, fmt)


def stored_columns() -> list[tuple[str, str, bool]]:
    """(level, name, is text) of every column a file holds (format 4), in the layout's order."""
    return [
        (lv, name, np.dtype(dtype).kind == "O")
        for lv in LEVELS
        for name, (dtype, _) in COLUMNS[lv].items()
        if not (lv == "theme" and name in DERIVED)
    ]


def slice_from_arrays(
    memory_id: str, z: dict[str, np.ndarray], stats: dict[str, Any], fmt: int = FORMAT
) -> MemorySlice:
    """:func:`slice_from_bytes` from a container's arrays (``unpack_arrays``, or a base file with its
    deltas applied: ``memory/deltas.py``); the same checks."""
    where = f"memory {memory_id}"
    cols: dict[str, dict[str, np.ndarray]] = {}
    for lv in LEVELS:
        cols[lv] = {}
        for name, (dtype, _) in COLUMNS[lv].items():
            key = f"{lv}.{name}"
            if lv == "theme" and name in DERIVED or fmt < 4 and (lv, name) in SINCE_4:
                continue
            if np.dtype(dtype).kind == "O":
                raw, off = z.get(f"{key}.utf8"), z.get(f"{key}.off")
                if raw is None or off is None:
                    raise SliceFormatError(f"{where}: column {key} is missing")
                if raw.dtype != np.uint8 or off.dtype != np.int64:
                    raise SliceFormatError(f"{where}: column {key}: expected uint8 bytes and int64 offsets")
                cols[lv][name] = _texts(raw.tobytes(), off, f"{where}: column {key}")
            else:
                a = z.get(key)
                if a is None:
                    raise SliceFormatError(f"{where}: column {key} is missing")
                if a.dtype != dtype:
                    raise SliceFormatError(
                        f"{where}: column {key}: expected {np.dtype(dtype)}, found {a.dtype}"
                    )
                cols[lv][name] = a
    if fmt < 4:  # no passages stored
        if cols["msg"]["x"].ndim != 2:
            raise SliceFormatError(f"{where}: column msg.x: shape {cols['msg']['x'].shape} is not [n, d]")
        n_msg, d = len(cols["msg"]["id"]), cols["msg"]["x"].shape[1]  # n from the ids' real bytes
        cols["msg"]["psg"] = np.full(n_msg, -1, np.int32)
        cols["psg"] = {"x": np.zeros((0, d), np.float32), "msg": np.zeros(0, np.int32)}
    sem, theme = cols["sem"], cols["theme"]
    if sem["x"].ndim != 2 or sem["theme"].shape != sem["x"].shape[:1] or theme["id"].ndim != 1:
        raise SliceFormatError(f"{where}: columns sem.x, sem.theme and theme.id do not fit together")
    if sem["theme"].size and (sem["theme"].min() < 0 or sem["theme"].max() >= theme["id"].shape[0]):
        raise SliceFormatError(f"{where}: column sem.theme: row ids outside 0..{theme['id'].shape[0] - 1}")
    theme.update(theme_columns(sem["x"], sem["theme"], theme["id"].shape[0]))
    cols["theme"] = {name: theme[name] for name in COLUMNS["theme"]}  # the layout's column order
    return MemorySlice(memory_id, cols, stats)


_FROM_ZERO = (("sem", "theme"), ("psg", "msg"))  # row references that may not be -1
_FINITE = (
    ("msg", "x"),
    ("epi", "x"),
    ("sem", "x"),
    ("theme", "sum"),
    ("theme", "x"),
    ("psg", "x"),
)  # no NaN nor inf


def check_slice(
    sl: MemorySlice,
    dim: int,
    counts: dict[str, int] | None = None,
    *,
    changed: dict[str, np.ndarray | int] | None = None,
    before: dict[str, int] | None = None,
) -> None:
    """Shapes, row references and finite values of a slice read from outside (a crafted or damaged
    file is refused with ``SliceFormatError`` naming memory, column and what is wrong). ``counts``:
    the rows per level the catalogue expects.

    ``changed`` (with ``before``, the rows per level of a version that passed these checks): the
    slice is that version with only these rows changed, per column ``LEVEL.NAME``: row numbers
    (int64 [k]) or the first changed row, every row after it changed too (a column not named kept
    its rows). The value checks then read those rows, and every row of a column that refers to a
    level with fewer rows than ``before``; the passages' order is read whole."""
    n = check_shapes(sl, dim, counts)
    _check_values(sl, n, changed, before)


def check_shapes(sl: MemorySlice, dim: int, counts: dict[str, int] | None = None) -> dict[str, int]:
    """``check_slice``'s shape checks (columns of each level agree on their rows, rows fit ``dim``
    and their kind); the rows per level."""
    where = f"memory {sl.memory_id}"
    n = {}
    for lv in LEVELS:
        lens = {name: a.shape[0] if a.ndim else -1 for name, a in sl.cols[lv].items()}
        if len(set(lens.values())) != 1:
            raise SliceFormatError(f"{where}: level {lv}: columns disagree on the row count ({lens})")
        n[lv] = next(iter(lens.values()))
        if counts is not None and n[lv] != counts[lv]:
            raise SliceFormatError(f"{where}: level {lv}: {n[lv]} rows, the catalogue says {counts[lv]}")
        for name, (_, kind) in COLUMNS[lv].items():
            a = sl.cols[lv][name]
            if (
                a.ndim != (1 if kind == "" else 2)
                or (kind == "d" and a.shape[1] != dim)
                or (kind in ("w", "k") and a.shape[1] < 1)
            ):
                raise SliceFormatError(f"{where}: column {lv}.{name}: shape {a.shape} does not fit dim {dim}")
    return n


def _holed(a: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether a row of ragged ``a`` [n, w] holds an entry >= 0 after a -1 (read ``chunk`` values at
    a time: a wide column's temporaries stay small)."""
    step = max(1, chunk // a.shape[1])
    for r in range(0, a.shape[0], step):
        b = a[r : r + step]
        if ((b[:, 1:] >= 0) & (b[:, :-1] < 0)).any():
            return True
    return False


def _check_values(
    sl: MemorySlice,
    n: dict[str, int],
    changed: dict[str, np.ndarray | int] | None,
    before: dict[str, int] | None,
) -> None:
    """``check_slice``'s value checks, over the rows ``changed`` names (all rows: None)."""
    where = f"memory {sl.memory_id}"

    def rows(lv: str, name: str, whole: bool = False) -> np.ndarray:
        a = sl.cols[lv][name]
        if changed is None or whole:
            return a
        got = changed.get(f"{lv}.{name}")
        if got is None:
            return a[:0]
        return a[got:] if isinstance(got, int) else a[got]

    shrunk = {lv for lv in LEVELS if before is not None and n[lv] < before[lv]}
    ref_rows = {(lv, name): rows(lv, name, target in shrunk) for (lv, name), target in ROW_REFS.items()}
    refs = [
        (ref_rows[lv, name], 0 if (lv, name) in _FROM_ZERO else -1, n[target])
        for (lv, name), target in ROW_REFS.items()
    ]
    # the theme sums and centroids are derived, never stored (nor diffed): read whole (one row a theme)
    finite = {(lv, name): rows(lv, name, lv == "theme" and name in DERIVED) for lv, name in _FINITE}
    times = {(lv, name): rows(lv, name) for lv, name in TIME_COLUMNS}
    for lv, name in RAGGED:  # valid entries first (what reading a row to its length relies on)
        a = rows(lv, name)
        if a.ndim == 2 and a.shape[1] > 1 and _holed(a):
            raise SliceFormatError(f"{where}: column {lv}.{name}: a row holds an entry after a -1")
    if columns.values_ok(
        refs,
        sl.cols["psg"]["msg"],
        sl.cols["msg"]["psg"],
        list(finite.values()),
        list(times.values()),
        MIN_TIME,
        MAX_TIME,
        [rows(lv, "knn_sim") for lv in ("sem", "theme")],
    ):
        return  # one C++ pass found nothing: the checks below say what is wrong when it does
    for (lv, name), target in ROW_REFS.items():
        a = ref_rows[lv, name]
        lo = 0 if (lv, name) in _FROM_ZERO else -1
        if a.size and (a.min() < lo or a.max() >= n[target]):
            raise SliceFormatError(f"{where}: column {lv}.{name}: row ids outside {lo}..{n[target] - 1}")
    psg_msg = sl.cols["psg"]["msg"]
    if psg_msg.size and (np.diff(psg_msg) < 0).any():
        raise SliceFormatError(f"{where}: column psg.msg: passages out of message order")
    first = sl.cols["msg"]["psg"]
    named = np.flatnonzero(first >= 0)
    if named.size and (psg_msg[first[named]] != named).any():
        raise SliceFormatError(f"{where}: column msg.psg: a first passage belongs to another message")
    for lv, name in _FINITE:
        bad = ~np.isfinite(finite[lv, name])
        if bad.any():
            at = np.flatnonzero(bad.any(axis=1))[:5].tolist()
            what = "rows" if changed is None else "changed rows, the"
            raise SliceFormatError(f"{where}: column {lv}.{name}: non-finite values in {what} {at}")
    for lv, name in TIME_COLUMNS:
        t = times[lv, name]
        known = t[~np.isnan(t)]
        if known.size and not ((known >= MIN_TIME) & (known < MAX_TIME)).all():
            raise SliceFormatError(f"{where}: column {lv}.{name}: times outside years 1-9999")
    for lv in ("sem", "theme"):
        if np.isnan(sl.cols[lv]["knn_sim"]).any():
            raise SliceFormatError(f"{where}: column {lv}.knn_sim: NaN values")
