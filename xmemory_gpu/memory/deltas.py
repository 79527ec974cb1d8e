"""A memory's later versions as delta files: the rows a commit changed, column by column.

The store keeps a memory as a base file (``codec``: every column) plus an ordered chain of delta
files. A delta is a container (``codec.pack_arrays``: a JSON header and raw arrays; nothing is
unpickled) holding

- ``follows`` uint8 [32]: the sha256 of the file it applies to (the base, or the delta before it);
- per changed numeric column ``LEVEL.NAME@R``: the column's rows from row ``R`` on;
- per numeric column whose changed old rows are few and far apart, ``LEVEL.NAME.at`` (int64 [k],
  increasing row numbers below the old length) and ``LEVEL.NAME.set`` ([k, ...]: those rows' new
  values), beside a ``LEVEL.NAME@R`` of the rows it appends (``R`` the old length), if any;
- per changed text column ``LEVEL.NAME.utf8@R`` and ``LEVEL.NAME.off@R``: those rows' UTF-8 bytes
  and their offsets (int64, from 0);
- per ragged column (``-1`` padded, ``bank.COLUMNS`` kind ``w``) that grows wider while its old rows
  stay few to set, ``LEVEL.NAME.width`` (int64 [1]): its new width.

Applying a delta first pads the columns a ``.width`` names to that width (with ``-1``), then sets the
rows a column's ``.at`` names, then keeps its rows ``0..R-1`` and puts the stored rows after them: ``R`` = the old length is an append, ``R = 0`` replaces the whole
column (another width included); a column a delta does not name is unchanged. A statement that
gains a source, or an old statement's kNN list that takes in a new neighbour, thus costs its row,
not every row after it; a statement that gains its widest row of sources costs its row and the
width, not the column. :func:`apply_chain` applies a chain in one pass (each column is
assembled once, whatever the chain's length).

:class:`Committed` is what a store remembers of a memory's last committed version, to diff the next
commit against: the files' bytes as read or written (decoded into columns on first need), then
private column buffers that a delta's rows update in place (the cost of a commit follows what it
changed). :class:`CommittedCache` bounds them by bytes, least recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ops import columns
from .bank import COLUMNS, LEVELS, MemorySlice, pad_width
from .codec import SliceFormatError, pack_arrays, stored_columns, unpack_arrays

COMPACT_SHARE = 0.5  # a fresh base once the chain's bytes would exceed this share of the base's
MAX_CHAIN = 32  # ... or the chain would hold more deltas than this
CACHE_BYTES = 128 << 20  # what a store's CommittedCache holds (files' bytes, about), its largest memory aside
FOLLOWS = "follows"
_CHUNK_BYTES = 1 << 18  # the byte comparison's chunk
# a column's changed old rows are set one by one when that takes under this share of the bytes
# from its first change on
_SCATTER_SHARE = 0.5
_AT, _SET = "at", "set"  # suffixes of a delta's set rows: ``LEVEL.NAME.at``, ``LEVEL.NAME.set``
_WIDTH = "width"  # suffix of a delta's new width of a ragged column: ``LEVEL.NAME.width``

_STORED = stored_columns()
_TEXT = {f"{lv}.{name}" for lv, name, text in _STORED if text}
_NUMERIC = {f"{lv}.{name}": np.dtype(COLUMNS[lv][name][0]) for lv, name, text in _STORED if not text}
_RAGGED = {key for key in _NUMERIC if COLUMNS[key.split(".")[0]][key.split(".")[1]][1] == "w"}
_PAD = -1  # what pads a ragged column's rows (``bank.empty_column``)


def _rows(a: np.ndarray) -> int:
    return int(a.shape[0]) if a.ndim else 1


def _same_rows(old: np.ndarray, new: np.ndarray) -> int:
    """How many leading rows of ``old`` and ``new`` (same length, dtype and row shape) are equal,
    byte for byte (a NaN equals itself, 0.0 is not -0.0)."""
    m = old.shape[0]
    if old.dtype.kind == "O":
        ne = old != new
        if not isinstance(ne, np.ndarray) or ne.shape != old.shape:
            ne = np.fromiter((a != b for a, b in zip(old, new)), bool, m)
        return int(ne.argmax()) if ne.any() else m
    row = old.dtype.itemsize * int(np.prod(old.shape[1:], dtype=np.int64))
    if row == 0:
        return m
    u = np.dtype(f"u{old.dtype.itemsize}")
    ov, nv = old.view(u), new.view(u)
    step = max(1, _CHUNK_BYTES // row)
    for i in range(0, m, step):
        a, b = ov[i : i + step], nv[i : i + step]
        if not np.array_equal(a, b):
            return i + int((a != b).reshape(len(a), -1).any(axis=1).argmax())
    return m


def _changed_rows(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The rows (int64, increasing) where numeric ``old`` and ``new`` (same length, dtype and row
    shape) differ byte for byte, compared a chunk at a time."""
    m = old.shape[0]
    row = old.dtype.itemsize * int(np.prod(old.shape[1:], dtype=np.int64))
    if m == 0 or row == 0:
        return np.zeros(0, np.int64)
    u = np.dtype(f"u{old.dtype.itemsize}")
    ov, nv = old.view(u).reshape(m, -1), new.view(u).reshape(m, -1)
    step = max(1, _CHUNK_BYTES // row)
    parts = [
        i + np.flatnonzero((ov[i : i + step] != nv[i : i + step]).any(axis=1)) for i in range(0, m, step)
    ]
    return np.concatenate(parts).astype(np.int64, copy=False)


def _changed_among(old: np.ndarray, new: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Which of ``rows`` (int64, increasing, below both lengths) differ between ``old`` and ``new``
    (same dtype and row shape), byte for byte as :func:`_same_rows` compares (text: as strings)."""
    if rows.size == 0:
        return rows
    if old.dtype.kind == "O":
        return rows[np.fromiter((a != b for a, b in zip(old[rows], new[rows])), bool, rows.size)]
    u = np.dtype(f"u{old.dtype.itemsize}")
    a, b = old[rows].view(u).reshape(rows.size, -1), new[rows].view(u).reshape(rows.size, -1)
    return rows[(a != b).any(axis=1)]


def _first_change_except(old: np.ndarray, new: np.ndarray, n: int, rows: np.ndarray) -> int | None:
    """:func:`first_change` where rows 0..n-1 other than ``rows`` are known to be equal."""
    at = _changed_among(old, new, rows)
    if at.size:
        return int(at[0])
    tail = first_change(old[n:], new[n:])
    return None if tail is None else n + tail


def _usable(kept: tuple[int, np.ndarray] | None, old: np.ndarray, new: np.ndarray) -> tuple | None:
    """A growth's kept rows of a column (``bank.KeptRows``) where they apply: same dtype and row
    shape, n no more than either length, the rows int64, increasing and below n; else None."""
    if kept is None or old.dtype != new.dtype or old.shape[1:] != new.shape[1:]:
        return None
    n, rows = kept
    ok = 0 <= n <= min(old.shape[0], new.shape[0]) and rows.dtype == np.int64 and rows.ndim == 1
    ok = ok and (rows.size == 0 or (rows[0] >= 0 and rows[-1] < n and bool((np.diff(rows) > 0).all())))
    return (n, rows) if ok else None


def first_change(old: np.ndarray, new: np.ndarray) -> int | None:
    """The first row of ``new`` that is not ``old``'s (``len(old)`` when ``new`` only appends, 0 when
    the dtype or row shape differs); None when they are equal."""
    if old.dtype != new.dtype or old.shape[1:] != new.shape[1:]:
        return 0
    m = min(old.shape[0], new.shape[0])
    r = _same_rows(old[:m], new[:m])
    return None if r == m and old.shape[0] == new.shape[0] else r


@dataclass
class Change:
    """What a commit changes in one memory's columns: per changed column (``LEVEL.NAME``) the first
    row it replaces from and a private copy of the new rows from there; per numeric column whose
    few changed old rows are set one by one, (their row numbers int64 [k], their new rows [k, ...]);
    rows per level before and after; per ragged column padded wider before its rows are set, its
    new width."""

    starts: dict[str, int]
    rows: dict[str, np.ndarray]
    before: dict[str, int]
    after: dict[str, int]
    scatter: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        """Whether any column changed."""
        return bool(self.starts or self.scatter or self.widths)

    def appends_only(self, level: str) -> bool:
        """Whether ``level`` kept every old row as it was (rows only appended, or none changed)."""
        n = self.before[level]
        return (
            self.after[level] >= n
            and all(r >= n for k, r in self.starts.items() if k.split(".", 1)[0] == level)
            and not any(k.split(".", 1)[0] == level for k in self.scatter)
        )

    def changed_rows(self) -> dict[str, np.ndarray | int]:
        """Per changed column, what ``codec.check_slice(changed=)`` reads: its set rows (int64
        [k]), the first row it replaces from (int: every row after it), or both as row numbers."""
        out: dict[str, np.ndarray | int] = {}
        for key in self.starts.keys() | self.scatter.keys():
            r, at = self.starts.get(key), self.scatter.get(key, (None, None))[0]
            if at is None:
                out[key] = r
            elif r is None:
                out[key] = at
            else:
                out[key] = np.concatenate(
                    [at, np.arange(r, self.after[key.split(".", 1)[0]], dtype=np.int64)]
                )
        return out

    def forgets(self) -> bool:
        """Whether a message was removed or changed, or a statement removed: what a delete or an
        update does (episodes and themes are regrouped as a memory grows; their rows come and go)."""
        return not self.appends_only("msg") or self.after["sem"] < self.before["sem"]


def diff(
    old: dict[str, np.ndarray], sl: MemorySlice, kept: dict[str, tuple[int, np.ndarray]] | None = None
) -> Change | None:
    """The change from columns ``old`` (``Committed.columns``) to slice ``sl`` (checked); None when a
    column of ``sl`` has another dtype than the layout's (a base file says what is wrong). ``kept``:
    per column, the rows a growth copied unchanged from ``old``'s version (``bank.KeptRows``): only
    the others are compared (a write costs what it changed, not the memory's rows); the same
    change either way (``CHECK_KEPT`` compares the two)."""
    change = _diff(old, sl, kept or {})
    if kept and CHECK_KEPT and not _same_change(change, _diff(old, sl, {})):
        raise AssertionError(f"memory {sl.memory_id}: a growth's kept rows do not match its columns")
    return change


# tests set this: every diff given kept rows is compared with the diff of every row
CHECK_KEPT = False


def _same_change(a: Change | None, b: Change | None) -> bool:
    if a is None or b is None:
        return a is b

    def same(x: np.ndarray, y: np.ndarray) -> bool:
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        return x.tolist() == y.tolist() if x.dtype.kind == "O" else x.tobytes() == y.tobytes()

    return (
        a.starts == b.starts
        and a.before == b.before
        and a.after == b.after
        and a.widths == b.widths
        and a.rows.keys() == b.rows.keys()
        and all(same(a.rows[k], b.rows[k]) for k in a.rows)
        and a.scatter.keys() == b.scatter.keys()
        and all(
            same(a.scatter[k][0], b.scatter[k][0]) and same(a.scatter[k][1], b.scatter[k][1])
            for k in a.scatter
        )
    )


def _diff(
    old: dict[str, np.ndarray], sl: MemorySlice, kept: dict[str, tuple[int, np.ndarray]]
) -> Change | None:
    starts, rows, scatter, widths = {}, {}, {}, {}
    for lv, name, text in _STORED:
        key, new = f"{lv}.{name}", sl.cols[lv][name]
        if (new.dtype.kind == "O") != text or not text and new.dtype != _NUMERIC[key]:
            return None
        was = old[key]
        hint = _usable(kept.get(key), was, new)
        r = first_change(was, new) if hint is None else _first_change_except(was, new, *hint)
        if r is None:
            continue
        m = was.shape[0]
        wider = _wider(key, was, new)
        if wider:
            r = 0  # every old row is compared with its padded self
        if not text and 0 < m <= new.shape[0] and r < m and (wider or (was.shape[1:] == new.shape[1:])):
            if wider:
                w = was.shape[1]
                at = _changed_rows(was, new[:m, :w]) if w else np.zeros(0, np.int64)
                at = np.union1d(at, np.flatnonzero((new[:m, w:] != _PAD).any(axis=1))).astype(np.int64)
            elif hint is None:
                at = r + _changed_rows(was[r:m], new[r:m])
            else:  # the kept rows' exceptions that differ, then the rows after n compared
                n, maybe = hint
                at = _changed_among(was, new, maybe[maybe >= r])
                if n < m:
                    at = np.concatenate([at, n + _changed_rows(was[n:m], new[n:m])])
            row = new.dtype.itemsize * int(np.prod(new.shape[1:], dtype=np.int64))
            # a width is one a row it writes fills (what reading it back checks), else the column goes whole
            fills = not wider or bool((new[at, -1] >= 0).any() or (new[m:, -1] >= 0).any())
            if fills and at.shape[0] * (row + 8) < _SCATTER_SHARE * (m - r) * row:
                scatter[key] = (at, np.array(new[at], copy=True))
                if wider:
                    widths[key] = int(new.shape[1])
                if new.shape[0] > m:
                    starts[key], rows[key] = m, np.array(new[m:], copy=True)
                continue
        starts[key], rows[key] = r, np.array(new[r:], copy=True)
    before = {lv: _rows(next(old[f"{lv}.{n}"] for l2, n, _ in _STORED if l2 == lv)) for lv in LEVELS}
    return Change(starts, rows, before, {lv: sl.n(lv) for lv in LEVELS}, scatter, widths)


def _wider(key: str, was: np.ndarray, new: np.ndarray) -> bool:
    """Whether ``new`` is ragged column ``key`` ``was`` (same dtype) with wider rows."""
    return (
        key in _RAGGED
        and was.dtype == new.dtype
        and was.ndim == new.ndim == 2
        and new.shape[1] > was.shape[1]
    )


def encode_delta(change: Change, follows: str) -> bytes:
    """The delta file of ``change``, applying to the file whose sha256 (hex) is ``follows``."""
    arrays: dict[str, np.ndarray] = {FOLLOWS: np.frombuffer(bytes.fromhex(follows), np.uint8)}
    for key, w in change.widths.items():
        arrays[f"{key}.{_WIDTH}"] = np.array([w], np.int64)
    for key, (at, rows) in change.scatter.items():
        arrays[f"{key}.{_AT}"], arrays[f"{key}.{_SET}"] = at, rows
    for key, r in change.starts.items():
        a = change.rows[key]
        if key in _TEXT:
            arrays[f"{key}.utf8@{r}"], arrays[f"{key}.off@{r}"] = columns.join_utf8(a.tolist())
        else:
            arrays[f"{key}@{r}"] = a
    return pack_arrays(arrays)


def _text_ok(raw: np.ndarray, off: np.ndarray) -> bool:
    return (
        raw.dtype == np.uint8
        and raw.ndim == 1
        and off.dtype == np.int64
        and off.ndim == 1
        and off.shape[0] >= 1
        and off[0] == 0
        and off[-1] == raw.shape[0]
        and not (np.diff(off) < 0).any()
    )


class _Column:
    """One column assembled from segments: arrays (numeric) or (bytes, offsets from 0) pairs (text)."""

    def __init__(self, text: bool) -> None:
        self.text, self.segs, self.n = text, [], 0
        self.owned = False  # whether segs is one array this object made (rows may be set in it)

    def _len(self, seg) -> int:
        return seg[1].shape[0] - 1 if self.text else seg.shape[0]

    def put(self, r: int, seg) -> None:
        """Rows ``r..`` become ``seg``'s (``r`` <= the rows held)."""
        kept, n = [], 0
        for s in self.segs:
            k = self._len(s)
            if k == 0:  # no rows: nothing to keep (its row width may not be the new rows')
                continue
            if n + k <= r:
                kept.append(s)
                n += k
                continue
            if r > n:
                cut = r - n
                kept.append((s[0][: s[1][cut]], s[1][: cut + 1]) if self.text else s[:cut])
            break
        self.segs = kept + [seg]
        self.n = r + self._len(seg)
        self.owned = False

    def set_rows(self, at: np.ndarray, rows: np.ndarray) -> None:
        """Rows ``at`` (numeric; checked by the caller) become ``rows``."""
        if not self.owned or len(self.segs) != 1:
            self.segs = [np.concatenate(self.segs) if len(self.segs) > 1 else self.segs[0].copy()]
            self.owned = True
        self.segs[0][at] = rows

    def widen(self, width: int) -> None:
        """Rows (numeric [n, w], ragged; checked by the caller) padded with ``-1`` to ``width``."""
        old = np.concatenate(self.segs) if len(self.segs) > 1 else self.segs[0]
        self.segs = [pad_width(old, width, _PAD)]
        self.owned = True

    def row_shape(self) -> tuple[int, ...] | None:
        return self.segs[-1].shape[1:] if self.segs and not self.text else None

    def dtype(self):
        return self.segs[-1].dtype if self.segs and not self.text else None

    def arrays(self, key: str) -> dict[str, np.ndarray]:
        if not self.text:
            out = self.segs[0] if len(self.segs) == 1 else np.concatenate(self.segs)
            return {key: out}
        if len(self.segs) == 1:
            raw, off = self.segs[0]
        else:
            raw = np.concatenate([s[0] for s in self.segs])
            shift = np.cumsum([0] + [s[0].shape[0] for s in self.segs[:-1]])
            off = np.concatenate([s[1][:-1] + d for s, d in zip(self.segs, shift)] + [[raw.shape[0]]])
        return {f"{key}.utf8": raw, f"{key}.off": off.astype(np.int64, copy=False)}


def _pieces(
    delta: dict[str, np.ndarray], where: str
) -> tuple[dict[str, tuple[int, Any]], dict[str, tuple[np.ndarray, np.ndarray]], dict[str, int]]:
    """A delta's columns: key -> (first row, rows), text rows as (bytes, offsets); its set rows:
    key -> (row numbers, rows); and its ragged columns' new widths: key -> width."""
    parts: dict[str, dict[str, Any]] = {}
    sets: dict[str, dict[str, np.ndarray]] = {}
    widths: dict[str, int] = {}
    for name, a in delta.items():
        if name == FOLLOWS:
            continue
        key, _, suffix = name.rpartition(".")
        if suffix in (_AT, _SET) and key in _NUMERIC:
            sets.setdefault(key, {})[suffix] = a
            continue
        if suffix == _WIDTH and key in _RAGGED:
            if a.dtype != np.int64 or a.shape != (1,) or not 0 < int(a[0]) < 2**31:
                raise SliceFormatError(f"{where}: column {key}: its width does not read")
            widths[key] = int(a[0])
            continue
        head, sep, at = name.rpartition("@")
        if not sep or not at.isdigit() or not at.isascii():
            raise SliceFormatError(f"{where}: array {name!r} is not a column of a delta")
        r = int(at)
        if head in _NUMERIC:
            parts[head] = {"r": r, "rows": a}
        elif head.endswith((".utf8", ".off")) and head.rsplit(".", 1)[0] in _TEXT:
            key, part = head.rsplit(".", 1)
            got = parts.setdefault(key, {"r": r})
            if got["r"] != r:
                raise SliceFormatError(f"{where}: column {key}: bytes and offsets start at different rows")
            got[part] = a
        else:
            raise SliceFormatError(f"{where}: array {name!r} is not a column of a delta")
    out = {}
    for key, got in parts.items():
        if key in _TEXT:
            raw, off = got.get("utf8"), got.get("off")
            if raw is None or off is None or not _text_ok(raw, off):
                raise SliceFormatError(f"{where}: column {key}: its bytes and offsets do not fit")
            out[key] = (got["r"], (raw, off))
        else:
            if got["rows"].ndim < 1:
                raise SliceFormatError(f"{where}: column {key}: not rows")
            out[key] = (got["r"], got["rows"])
    scattered = {}
    for key, got in sets.items():
        at, rows = got.get(_AT), got.get(_SET)
        if (
            at is None
            or rows is None
            or at.dtype != np.int64
            or at.ndim != 1
            or rows.ndim < 1
            or rows.shape[0] != at.shape[0]
            or (at.shape[0] and at[0] < 0)
            or (at[1:] <= at[:-1]).any()  # increasing (np.diff would wrap around at the int64 ends)
        ):
            raise SliceFormatError(f"{where}: column {key}: its set rows do not fit")
        scattered[key] = (at, rows)
    return out, scattered, widths


def apply_chain(
    base: dict[str, np.ndarray], chain: list[tuple[dict[str, np.ndarray], str]], base_sha: str, where: str
) -> dict[str, np.ndarray]:
    """The arrays of a base file (``unpack_arrays``) with its deltas applied in order: ``chain`` is
    each delta's arrays and its file's sha256, ``base_sha`` the base's. A delta that follows another
    file or does not fit the columns raises ``SliceFormatError`` (naming ``where``); the result is
    checked as a base file is (``codec.slice_from_arrays``)."""
    cols: dict[str, _Column] = {}
    for key in _NUMERIC:
        if key in base:
            cols[key] = _Column(False)
            cols[key].put(0, base[key] if base[key].ndim else base[key].reshape(1))
    for key in _TEXT:
        raw, off = base.get(f"{key}.utf8"), base.get(f"{key}.off")
        if raw is not None and off is not None:
            if not _text_ok(raw, off):
                raise SliceFormatError(f"{where}: column {key}: offsets do not cut its {raw.shape[0]} bytes")
            cols[key] = _Column(True)
            cols[key].put(0, (raw, off))
    prev = base_sha
    for i, (delta, sha) in enumerate(chain):
        w = f"{where}: delta {i + 1} of {len(chain)}"
        follows = delta.get(FOLLOWS)
        if follows is None or follows.dtype != np.uint8 or follows.tobytes().hex() != prev:
            raise SliceFormatError(f"{w}: it does not follow the file before it")
        tails, sets, widths = _pieces(delta, w)
        for key, width in widths.items():
            col = cols.get(key)
            if col is None or col.text:
                raise SliceFormatError(f"{w}: column {key} is not in the base file")
            shape = col.row_shape()
            if shape is None or len(shape) != 1 or width <= shape[0]:
                raise SliceFormatError(f"{w}: column {key}: its width {width} does not widen it")
            written = [got[1] for got in (sets.get(key), tails.get(key)) if got is not None]
            if not any(a.ndim == 2 and a.shape[1] == width and (a[:, -1] >= 0).any() for a in written):
                raise SliceFormatError(f"{w}: column {key}: no row it writes is {width} wide")
            col.widen(width)
        for key, (at, rows) in sets.items():
            col = cols.get(key)
            if col is None or col.text:
                raise SliceFormatError(f"{w}: column {key} is not in the base file")
            if at.shape[0] and at[-1] >= col.n:
                raise SliceFormatError(f"{w}: column {key}: sets row {int(at[-1])} of {col.n}")
            if rows.dtype != col.dtype() or rows.shape[1:] != col.row_shape():
                raise SliceFormatError(f"{w}: column {key}: its rows do not fit the column")
            col.set_rows(at, rows)
        for key, (r, rows) in tails.items():
            col = cols.get(key)
            if col is None:
                raise SliceFormatError(f"{w}: column {key} is not in the base file")
            if r > col.n:
                raise SliceFormatError(f"{w}: column {key}: starts at row {r} of {col.n}")
            if r and not col.text and (rows.dtype != col.dtype() or rows.shape[1:] != col.row_shape()):
                raise SliceFormatError(f"{w}: column {key}: its rows do not fit the column")
            col.put(r, rows)
        prev = sha
    out = {k: v for k, v in base.items() if k not in cols and k.rsplit(".", 1)[0] not in cols}
    for key, col in cols.items():
        out.update(col.arrays(key))
    return out


def decode_columns(arrays: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    """Container arrays (a format 4 file, deltas applied) as the columns ``diff`` compares: numeric
    ones as they are, text ones as object [n] str."""
    out = {}
    for lv, name, text in _STORED:
        key = f"{lv}.{name}"
        if text:
            try:
                out[key] = columns.split_utf8(arrays[f"{key}.utf8"].tobytes(), arrays[f"{key}.off"])
            except (KeyError, UnicodeDecodeError, columns.ColumnsError):
                raise SliceFormatError(f"{where}: column {key} does not read") from None
        elif key in arrays:
            out[key] = arrays[key]
        else:
            raise SliceFormatError(f"{where}: column {key} is missing")
    return out


@dataclass
class Committed:
    """A memory's last committed version as this store wrote or read it: the sha256 of its chain's
    head, the byte sizes of its base and deltas, and its columns (``columns``)."""

    head: str
    base_size: int
    chain: list[int]
    files: tuple[bytes, str, list[tuple[bytes, str]]] | None = None  # base, its sha256, deltas: until decoded
    bufs: dict[str, list] = field(default_factory=dict)  # key -> [buffer, rows]: column = buffer[:rows]

    @classmethod
    def of_files(cls, base: bytes, base_sha: str, deltas: list[tuple[bytes, str]]) -> Committed:
        """The version held by these files (bytes and sha256 each, verified), decoded on first need."""
        head = deltas[-1][1] if deltas else base_sha
        return cls(head, len(base), [len(d) for d, _ in deltas], (base, base_sha, list(deltas)))

    @property
    def nbytes(self) -> int:
        return self.base_size + sum(self.chain)

    def columns(self, memory_id: str) -> dict[str, np.ndarray]:
        """The version's columns (for reading only: they are this object's buffers); the files are
        decoded on the first call (``SliceFormatError`` if they do not)."""
        if self.files is not None:
            where = f"memory {memory_id}"
            base, base_sha, deltas = self.files
            arrays = unpack_arrays(base, where)
            if deltas:
                arrays = apply_chain(
                    arrays, [(unpack_arrays(d, where), sha) for d, sha in deltas], base_sha, where
                )
            self.bufs = {k: [a, a.shape[0]] for k, a in decode_columns(arrays, where).items()}
            self.files = None
        return {k: b[:n] for k, (b, n) in self.bufs.items()}

    def apply(self, change: Change, head: str, size: int) -> None:
        """The version after ``change``, committed as a delta of ``size`` bytes whose sha256 is ``head``."""
        for key, width in change.widths.items():  # capacity kept: appends after it copy what they add
            buf, n = self.bufs[key]
            self.bufs[key] = [pad_width(buf, width, _PAD), n]
        for key, (at, rows) in change.scatter.items():  # the buffers are this object's copies
            self.bufs[key][0][at] = rows
        for key, r in change.starts.items():
            rows = change.rows[key]
            buf, n = self.bufs[key]
            end = r + rows.shape[0]
            if buf.dtype != rows.dtype or buf.shape[1:] != rows.shape[1:]:
                self.bufs[key] = [rows, rows.shape[0]]
                continue
            if end > buf.shape[0]:  # room for half as many rows again: appends copy what they add
                grown = np.empty((max(end, n + n // 2 + 16),) + buf.shape[1:], buf.dtype)
                grown[:r] = buf[:r]
                buf = grown
            buf[r:end] = rows
            self.bufs[key] = [buf, end]
        self.head = head
        self.chain.append(size)


class CommittedCache:
    """Memory id -> :class:`Committed`, at most ``budget`` bytes (``Committed.nbytes``), least
    recently used first out, plus the last written entry larger than the budget, held beside them
    outside it (so at most the budget plus the largest memory): a large memory that is being written
    goes on writing deltas rather than its whole base per commit, and the small ones keep theirs.
    Safe across threads."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self._items: OrderedDict[str, tuple[Committed, int]] = OrderedDict()  # entry, its bytes when put
        self._total = 0
        self._large: tuple[str, Committed] | None = None  # the one entry over the budget
        self._lock = threading.Lock()

    def get(self, memory_id: str) -> Committed | None:
        with self._lock:
            if self._large is not None and self._large[0] == memory_id:
                return self._large[1]
            got = self._items.get(memory_id)
            if got is None:
                return None
            self._items.move_to_end(memory_id)
            return got[0]

    def put(self, memory_id: str, entry: Committed) -> None:
        """Remember ``entry`` (again, after it changed): one larger than the budget replaces the
        large one held; the others join the budget, the least recently used going past it."""
        with self._lock:
            self._pop(memory_id)
            if entry.nbytes > self.budget:
                self._large = (memory_id, entry)
                return
            self._items[memory_id] = (entry, entry.nbytes)
            self._total += entry.nbytes
            while self._total > self.budget:
                self._pop(next(iter(self._items)))

    def _pop(self, memory_id: str) -> None:
        if self._large is not None and self._large[0] == memory_id:
            self._large = None
        got = self._items.pop(memory_id, None)
        if got is not None:
            self._total -= got[1]

    def drop(self, memory_id: str) -> None:
        with self._lock:
            self._pop(memory_id)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0
            self._large = None
