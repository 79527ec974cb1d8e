"""The bank: every memory of a store in struct-of-arrays form, the only in-memory layout.
Construction fills it, the store persists its per-memory slices, the kernels
read it in one launch, retrieval serves from it.

Four levels (``msg``, ``epi``, ``sem``, ``theme``) plus the passages of long messages (``psg``: a
message longer than the passage length, embedded passage by passage at construction, each passage's
row here and the message's ``psg`` column pointing at its first), each a :class:`Level`: row-aligned columns in one
arena plus :class:`Segments` (memory b owns rows ``starts[b] .. starts[b] + lengths[b]``). Columns
that point at rows (episode -> messages, semantic -> episodes / messages / theme, kNN graphs) hold
**global** arena rows, ``-1`` for none; ragged ones are fixed-width and ``-1``-padded. A memory's
slice (:class:`MemorySlice`) holds the same columns with **local** rows; :func:`Bank.from_slices`
and :meth:`Bank.slice` are the only places that convert between the two.

Growth (the live engine): :meth:`Bank.put_slice` rewrites one memory in place when it fits its
segment's capacity, else moves it to the arena's end (other memories' rows never move);
:meth:`Bank.compact` closes holes and slack. ``Bank.version`` counts the bank's writes: a value
derived from a bank (a retriever's naive-RAG chunks, its chunk-rag passages) is current while it
was built from the same bank object at the same version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .device import DeviceMirrors, WriteLog, merged_ranges
from .engine_state import KEY as ENGINE_KEY
from .engine_state import EngineState
from .segments import Segments

LEVELS = ("msg", "epi", "sem", "theme", "psg")

# level -> column -> (dtype, trailing shape kind): "d" embedding width, "w" ragged width, "k" graph width, "" 1-D
COLUMNS: dict[str, dict[str, tuple[Any, str]]] = {
    "msg": {
        "x": (np.float32, "d"),
        "id": (object, ""),
        "speaker": (object, ""),
        "text": (object, ""),
        "session": (np.int64, ""),
        "time": (np.float64, ""),
        "psg": (np.int32, ""),
    },
    "epi": {
        "x": (np.float32, "d"),
        "id": (np.int64, ""),
        "title": (object, ""),
        "text": (object, ""),
        "start": (np.float64, ""),
        "end": (np.float64, ""),
        "msgs": (np.int32, "w"),
    },
    "sem": {
        "x": (np.float32, "d"),
        "id": (np.int64, ""),
        "text": (object, ""),
        "time": (np.float64, ""),
        "epis": (np.int32, "w"),
        "msgs": (np.int32, "w"),
        "theme": (np.int32, ""),
        "knn_idx": (np.int32, "k"),
        "knn_sim": (np.float32, "k"),
    },
    "theme": {
        "id": (np.int64, ""),
        "summary": (object, ""),
        "parents": (np.int64, "w"),
        "sum": (np.float32, "d"),
        "count": (np.int32, ""),
        "x": (np.float32, "d"),
        "knn_idx": (np.int32, "k"),
        "knn_sim": (np.float32, "k"),
    },
    # a long message's passages (``text.passages``), in message order: their rows and their message
    "psg": {"x": (np.float32, "d"), "msg": (np.int32, "")},
}
# columns holding rows of another level (global in a bank, local in a slice)
ROW_REFS: dict[tuple[str, str], str] = {
    ("epi", "msgs"): "msg",
    ("sem", "epis"): "epi",
    ("sem", "msgs"): "msg",
    ("sem", "theme"): "theme",
    ("sem", "knn_idx"): "sem",
    ("theme", "knn_idx"): "theme",
    ("msg", "psg"): "psg",
    ("psg", "msg"): "msg",
}
_FILL = {np.dtype(np.int32): -1, np.dtype(np.int64): -1, np.dtype(np.float64): np.nan}
DERIVED = ("sum", "count", "x")  # theme columns computed from sem.x and sem.theme, never stored
_STORED_KEYS = frozenset(
    f"{lv}.{name}" for lv in COLUMNS for name in COLUMNS[lv] if not (lv == "theme" and name in DERIVED)
)
# per level, the levels its row references point to (their moves change its stored global rows)
_REF_TARGETS = {lv: tuple(sorted({t for (l2, _), t in ROW_REFS.items() if l2 == lv})) for lv in COLUMNS}
_NOTE_ROWS = 64  # changed rows noted one by one for the device copies (then merged), the rest as one range


def _fill_value(name: str, dtype: np.dtype) -> Any:
    if name == "knn_sim":
        return -np.inf
    if np.dtype(dtype).kind == "O":
        return ""
    return _FILL.get(np.dtype(dtype), 0)


def empty_column(level: str, name: str, n: int, dim: int, width: int = 1) -> np.ndarray:
    dtype, kind = COLUMNS[level][name]
    shape = (n, dim) if kind == "d" else (n, width) if kind in ("w", "k") else (n,)
    return np.full(shape, _fill_value(name, np.dtype(dtype)), dtype=dtype)


def pad_width(a: np.ndarray, width: int, fill: Any) -> np.ndarray:
    """[n, w] -> [n, width] (width >= w), padded with ``fill``."""
    if a.shape[1] == width:
        return a
    out = np.full((a.shape[0], width), fill, dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def ragged_blocks(a: np.ndarray, rows: np.ndarray | None = None):
    """(rows [k], c) blocks covering ``rows`` (default: all) of a ragged column a [n, w] (valid
    entries first, ``-1`` after), each row with at most c entries, c = 4, 16, 64, ... or w: a row is
    read to about its length, not the column's width, which its longest row sets for all."""
    w = a.shape[1]
    rows, c = (np.arange(a.shape[0]) if rows is None else np.asarray(rows, np.int64)), 4
    while rows.size:
        if c < w:
            fits = a[rows, c] < 0  # at most c entries
            yield rows[fits], c
            rows = rows[~fits]
        else:
            yield rows, w
            return
        c *= 4


def ragged_reduce(a: np.ndarray, reduce: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``reduce(block [k, c]) -> [k]`` of each row of a ragged column a [n, w] (valid entries first,
    ``-1`` after), read to about its length (``ragged_blocks``); ``reduce``'s answer must not depend
    on the padding (a length, a maximum, whether an entry is marked). Returns [n] (int64: no rows)."""
    out: np.ndarray | None = None
    for here, c in ragged_blocks(a):
        got = reduce(a[here, :c])
        if out is None:
            out = np.empty(a.shape[0], got.dtype)
        out[here] = got
    return out if out is not None else np.zeros(0, np.int64)


def ragged_lengths(a: np.ndarray) -> np.ndarray:
    """The entries of each row of a ragged column a [n, w] (``ragged_reduce``)."""
    return ragged_reduce(a, lambda b: (b >= 0).sum(axis=1))


def ragged_map(
    a: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], rows: np.ndarray | None = None, dtype: Any = None
) -> np.ndarray:
    """``fn(block [k, c]) -> [k, c]`` of the ``rows`` (default: all) of a ragged column a [n, w]
    (valid entries first, ``-1`` after), read to about their length (``ragged_blocks``), as a new
    column [len(rows), w] of ``dtype`` (default a's), ``-1`` past each block; ``fn`` maps ``-1`` to
    ``-1``."""
    rows = np.arange(a.shape[0]) if rows is None else np.asarray(rows, np.int64)
    out = np.full((rows.shape[0], a.shape[1]), -1, dtype or a.dtype)
    at = np.empty(a.shape[0], np.int64)
    at[rows] = np.arange(rows.shape[0])
    for here, c in ragged_blocks(a, rows):
        out[at[here], :c] = fn(a[here, :c])
    return out


@dataclass(frozen=True)
class KeptRows:
    """The rows a growth copied unchanged from the slice it grew (``base``): per column
    ``LEVEL.NAME``, (n, rows): the new column's rows 0..n-1 are ``base``'s, byte for byte, except
    ``rows`` (int64 [k], increasing, below n). The store compares only the others with the stored
    version (``deltas.diff``'s ``kept``)."""

    base: MemorySlice
    columns: dict[str, tuple[int, np.ndarray]]


@dataclass
class MemorySlice:
    """One memory's columns with local rows (what construction emits and the store reads and
    writes), its stats (counts, f(P), ...) and the live engine's state (None: built in bulk);
    ``kept``: what a growth copied from the slice it grew (None: unknown)."""

    memory_id: str
    cols: dict[str, dict[str, np.ndarray]]  # level -> column -> array
    stats: dict[str, Any] = field(default_factory=dict)
    engine: EngineState | None = None
    kept: KeptRows | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if ENGINE_KEY in self.stats:  # stats as a catalogue stores them: the engine's state is typed here
            self.stats, state = EngineState.split(self.stats, self.n("msg"))
            if self.engine is None:
                self.engine = state

    def n(self, level: str) -> int:
        return int(next(iter(self.cols[level].values())).shape[0])


class RowCache:
    """Values derived from a level's rows (a long message's passage lines, an episode's line ends),
    computed lazily per row and dropped for the rows the bank writes (``Bank.put_slice`` notes
    them in the level's :class:`WriteLog`). A replaced column (the arena grew, a ragged column
    widened), a log that no longer reaches back, or any write to a level in ``depends`` drops them
    all. ``sync`` before a batch of reads (``Level.rows_cache`` does); rows are global.

    ``key``: column names whose values the value is a function of (and of nothing else, the cache's
    name aside). Such a cache carries its values over a rewrite to the rows whose key is unchanged: a
    delete renumbers every later row, and without a key each of them would be computed again on the
    next read (a search after a delete would pay for the whole memory). The carry happens at ``sync``,
    only onto rows that hold the same key now, so a deleted row's value is not kept."""

    def __init__(
        self,
        level: Level,
        fn: Callable[[int], Any],
        depends: tuple[Level, ...] = (),
        key: tuple[str, ...] = (),
    ) -> None:
        if key and depends:
            raise ValueError("a keyed row cache reads its own level's key columns only (no depends)")
        for c in key:
            if c not in level.cols or level.cols[c].ndim != 1:
                raise ValueError(f"row cache key: {c!r} must be a 1-D column of the level")
        self.fn, self._level, self._depends, self.key = fn, level, depends, key
        self._cols, self._deps = self._columns(), self._dep_state()
        self._cursor = level.writes.count
        self.values: list[Any] = [_MISSING] * level.rows_allocated
        self._keys: list[Any] | None = [None] * level.rows_allocated if key else None

    def _columns(self) -> list[np.ndarray]:
        return list(self._level.cols.values())

    def _dep_state(self) -> list[tuple[int, list[np.ndarray]]]:
        return [(d.writes.count, list(d.cols.values())) for d in self._depends]

    @staticmethod
    def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))

    def _key_of(self, row: int) -> tuple:
        return tuple(self._level.cols[c][row] for c in self.key)

    def sync(self) -> RowCache:
        lv = self._level
        cols, deps = self._columns(), self._dep_state()
        same = (
            self._same(cols, self._cols)
            and len(deps) == len(self._deps)
            and all(n == m and self._same(c, d) for (n, c), (m, d) in zip(deps, self._deps))
        )
        todo = lv.writes.since(self._cursor) if same else None
        if todo is None or len(self.values) != lv.rows_allocated:
            self._reset(lv.rows_allocated)
        else:
            kept = self._kept(r for start, stop in todo for r in range(start, stop))
            for start, stop in todo:
                self.values[start:stop] = [_MISSING] * (stop - start)
                if self._keys is not None:  # a dropped row keeps nothing of its text, carried or not
                    self._keys[start:stop] = [None] * (stop - start)
            self._carry(kept, todo)
        self._cols, self._deps, self._cursor = cols, deps, lv.writes.count
        return self

    def _reset(self, n: int) -> None:
        """Every row dropped (columns replaced, the log out of reach); a keyed cache keeps the computed
        rows that still hold their key at the same row (an arena that grew, a ragged column that
        widened: rows keep their places), a pass over the computed rows only."""
        values: list[Any] = [_MISSING] * n
        keys: list[Any] | None = None
        if self._keys is not None:
            keys = [None] * n
            old_values, old_keys = self.values, self._keys
            for r, k in enumerate(old_keys):
                if k is not None and r < n and old_values[r] is not _MISSING and self._key_of(r) == k:
                    values[r], keys[r] = old_values[r], k
        self.values, self._keys = values, keys

    def _kept(self, rows: Iterable[int]) -> dict | None:
        """key -> value of the computed ``rows`` (None without a key)."""
        if self._keys is None:
            return None
        out = {}
        for r in rows:
            v, k = self.values[r], self._keys[r]
            if v is not _MISSING and k is not None:
                out[k] = v
        return out

    def _carry(self, kept: dict | None, ranges: Iterable[tuple[int, int]]) -> None:
        """Put the ``kept`` values back on the rows of ``ranges`` whose key is the same now."""
        if not kept:
            return
        for start, stop in ranges:
            for r in range(start, stop):
                k = self._key_of(r)
                v = kept.get(k, _MISSING)
                if v is not _MISSING:
                    self.values[r], self._keys[r] = v, k

    def __getitem__(self, row: int) -> Any:
        v = self.values[row]
        if v is _MISSING:
            v = self.values[row] = self.fn(row)
            keys = self._keys
            if keys is not None and row < len(keys):  # a sync in another thread may have replaced it
                keys[row] = self._key_of(row)
        return v


_MISSING = object()


def _copy_state(st: EngineState | None) -> EngineState | None:
    return None if st is None else st.copy()


def _row_norms(x: np.ndarray) -> np.ndarray:
    """[n] float32 L2 norms of the rows of x [n, d] float32, in float32 (a row's value is its own)."""
    return np.sqrt(np.einsum("ij,ij->i", x, x))


@dataclass
class Level:
    """Row-aligned columns of one level in one arena, with the memories' segments."""

    cols: dict[str, np.ndarray]
    seg: Segments
    writes: WriteLog = field(
        default_factory=WriteLog, repr=False
    )  # rows rewritten in place (device mirrors sync them)
    mirrors: DeviceMirrors = field(default_factory=DeviceMirrors, repr=False)
    derived: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # name -> RowCache (``Level.rows_cache``)
    norms: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # column -> (that column, write count, its rows' norms, which are computed) (``Level.row_norms``)

    def rows_cache(
        self,
        name: str,
        fn: Callable[[int], Any],
        depends: tuple[Level, ...] = (),
        key: tuple[str, ...] = (),
    ) -> RowCache:
        """The values ``fn(row)`` of this level's rows, computed on first use and kept until the bank
        rewrites the row (``RowCache``); ``depends``: other levels the values read (any write there
        drops them all); ``key``: the columns the values are a function of (carried over rewrites
        to the rows that keep them)."""
        rc = self.derived.get(name)
        if rc is None:
            rc = self.derived[name] = RowCache(self, fn, depends, key)
        rc.fn = fn  # the same values by name; the newest closure reads the current columns
        return rc.sync()

    def row_norms(self, name: str, rows: np.ndarray) -> np.ndarray:
        """[len(rows)] float32: the L2 norm of each of ``rows`` (global) of the float32 column ``name``
        [rows_allocated, d] (``sqrt`` of the row's einsum with itself, as a host search takes it;
        a row's bits are its own, whatever rows are computed with it). A row's norm is computed on
        its first read and kept until the bank writes the row (``writes``; a replaced column or a log
        that no longer reaches back drops them all), so a search pays for the rows of its memory once,
        never for the bank. Updated on copies, so readers that sync at once each hold whole vectors."""
        col = self.cols[name]
        rows = np.asarray(rows, np.int64)
        held = self.norms.get(name)
        todo = None if held is None or held[0] is not col else self.writes.since(held[1])
        if todo is None:  # new vectors of this call's own
            norms, have = np.zeros(len(col), np.float32), np.zeros(len(col), bool)
        else:  # the held vectors are read-only: each is copied before it changes
            norms, have = held[2], held[3]
            if todo:
                have = have.copy()
                for start, stop in todo:
                    have[start:stop] = False
        missing = rows[~have[rows]]
        if todo == [] and not len(missing):
            return norms[rows]  # nothing written, nothing new
        if len(missing):
            missing = np.unique(missing)
            if todo is not None:
                norms = norms.copy()
                have = have if todo else have.copy()
            norms[missing] = _row_norms(col[missing])
            have[missing] = True
        norms.setflags(write=False)
        have.setflags(write=False)
        self.norms[name] = (col, self.writes.count, norms, have)
        return norms[rows]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def on_device(self, name: str, device: Any) -> Any:
        """Column ``name`` as a torch tensor on ``device``, uploaded once and then kept in sync
        (only rows written since go up; see ``memory/device.py``)."""
        return self.mirrors.column(name, self.cols[name], self.writes, device)

    @property
    def rows_allocated(self) -> int:
        return int(next(iter(self.cols.values())).shape[0])


class Bank:
    """Many memories as columns; ``bank.index[memory_id]`` is a memory's number ``b``."""

    def __init__(
        self,
        memory_ids: list[str],
        levels: dict[str, Level],
        stats: list[dict[str, Any]],
        dim: int,
        engine: list[EngineState | None] | None = None,
    ) -> None:
        self.memory_ids = list(memory_ids)
        self.index: dict[str, int] = {m: b for b, m in enumerate(self.memory_ids)}
        if len(self.index) != len(self.memory_ids):
            raise ValueError("Bank: memory ids must be unique")
        self.levels = levels
        self.stats = stats
        self.engine: list[EngineState | None] = (
            list(engine) if engine is not None else [None] * len(self.memory_ids)
        )
        self.dim = int(dim)
        self.version = 0  # writes so far (``put_slice``); a copy (``without``, ``compact``) is a new bank

    # -- levels and kernel views ---------------------------------------------------------------
    @property
    def msg(self) -> Level:
        return self.levels["msg"]

    @property
    def epi(self) -> Level:
        return self.levels["epi"]

    @property
    def sem(self) -> Level:
        return self.levels["sem"]

    @property
    def theme(self) -> Level:
        return self.levels["theme"]

    @property
    def psg(self) -> Level:
        return self.levels["psg"]

    @property
    def n_memories(self) -> int:
        return len(self.memory_ids)

    def index_of(self, memory_id: str) -> int:
        try:
            return self.index[memory_id]
        except KeyError:
            raise KeyError(f"memory {memory_id!r} is not in this bank ({self.n_memories} memories)") from None

    # the arrays kernels read, and their CSR offsets (compact banks)
    sem_x = property(lambda self: self.sem["x"])
    epi_x = property(lambda self: self.epi["x"])
    msg_x = property(lambda self: self.msg["x"])
    theme_x = property(lambda self: self.theme["x"])
    theme_of = property(lambda self: self.sem["theme"])
    sem_knn_idx = property(lambda self: self.sem["knn_idx"])
    sem_knn_sim = property(lambda self: self.sem["knn_sim"])
    theme_knn_idx = property(lambda self: self.theme["knn_idx"])
    theme_knn_sim = property(lambda self: self.theme["knn_sim"])
    sem_offsets = property(lambda self: self.sem.seg.offsets)
    theme_offsets = property(lambda self: self.theme.seg.offsets)

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def from_slices(
        cls,
        slices: Iterable[MemorySlice],
        dim: int,
        *,
        lengths: dict[str, list[int]] | None = None,
        memory_ids: list[str] | None = None,
    ) -> Bank:
        """Concatenate memories' slices once, local rows made global (the one conversion).

        With ``lengths`` (rows per level per memory) and ``memory_ids``, ``slices`` may be a
        generator: each slice is copied into preallocated columns and dropped, so the bank's
        arrays are the only copy held (loading a store)."""
        if lengths is None:
            slices = list(slices)
            lengths = {lv: [s.n(lv) for s in slices] for lv in LEVELS}
            memory_ids = [s.memory_id for s in slices]
        segs = {lv: Segments.from_lengths(lengths[lv]) for lv in LEVELS}
        cols = {
            lv: {name: empty_column(lv, name, segs[lv].size, dim) for name in COLUMNS[lv]} for lv in LEVELS
        }
        ids, stats, engine = [], [], []
        for b, sl in enumerate(slices):
            ids.append(sl.memory_id)
            stats.append(dict(sl.stats))
            engine.append(_copy_state(sl.engine))
            for lv in LEVELS:
                n = sl.n(lv)
                if n != segs[lv].lengths[b]:
                    raise ValueError(
                        f"Bank.from_slices: memory {sl.memory_id}: {lv} has {n} rows, expected {segs[lv].lengths[b]}"
                    )
                start = int(segs[lv].starts[b])
                for name, a in sl.cols[lv].items():
                    if n == 0:
                        continue
                    col = cols[lv][name]
                    if a.ndim == 2 and COLUMNS[lv][name][1] in ("w", "k"):
                        if a.shape[1] > col.shape[1]:
                            col = cols[lv][name] = pad_width(col, a.shape[1], _fill_value(name, col.dtype))
                        a = pad_width(a, col.shape[1], _fill_value(name, col.dtype))
                    target = ROW_REFS.get((lv, name))
                    if target is not None:
                        a = np.where(a >= 0, a + segs[target].starts[b], -1)
                    col[start : start + n] = a
        if memory_ids is not None and ids != list(memory_ids):
            raise ValueError("Bank.from_slices: the slices do not match memory_ids")
        return cls(ids, {lv: Level(cols[lv], segs[lv]) for lv in LEVELS}, stats, dim, engine)

    def slice(self, b: int, *, copy: bool = True) -> MemorySlice:
        """Memory b's columns with local rows: copies, or (``copy=False``) read-only views of the
        bank's rows where they need no change (row references of a memory that is not first in its
        level are copied, to be made local), valid until the bank's next write."""
        cols: dict[str, dict[str, np.ndarray]] = {}
        for lv in LEVELS:
            level = self.levels[lv]
            start = int(level.seg.starts[b])
            rows = slice(start, start + int(level.seg.lengths[b]))
            cols[lv] = {}
            for name, a in level.cols.items():
                target = ROW_REFS.get((lv, name))
                first = int(self.levels[target].seg.starts[b]) if target is not None else 0
                part = a[rows].copy() if copy or first else a[rows]
                if first:  # global rows of another level to local ones (-1 stays -1)
                    np.subtract(part, part.dtype.type(first), out=part, where=part >= 0)
                if not copy:
                    part.flags.writeable = False
                cols[lv][name] = part
        return MemorySlice(self.memory_ids[b], cols, dict(self.stats[b]), _copy_state(self.engine[b]))

    # -- growth (live engine) ------------------------------------------------------------------
    def put_slice(
        self, sl: MemorySlice, *, slack: float = 0.25, changed: Mapping[str, np.ndarray | int] | None = None
    ) -> int:
        """Add memory ``sl.memory_id`` or replace its rows; returns its number. Its rows are
        rewritten in place when they fit its segment's capacity (or the segment is the arena's last:
        it grows there); otherwise it moves to the end of the arena with ``slack`` spare room. No
        other memory's rows move. ``version`` goes up once the rows are written (even when the write
        fails part-way: the bank may have changed).

        ``changed``: ``sl`` is the memory as the bank holds it but for these rows of its stored
        columns (``LEVEL.NAME`` -> row numbers int64 [k], or the first row of a tail; a stored column
        not named is unchanged: ``deltas.Change.changed_rows`` of a diff against the bank's rows),
        so only they are written (and noted for the device copies) where the memory stays in place;
        the derived theme columns are written whole."""
        try:
            return self._put(sl, slack, changed)
        finally:
            self.version += 1

    def _put(
        self, sl: MemorySlice, slack: float, changed: Mapping[str, np.ndarray | int] | None = None
    ) -> int:
        """``put_slice``'s writes."""
        if sl.memory_id in self.index:
            b = self.index[sl.memory_id]
        else:
            b = self.n_memories
            self.memory_ids.append(sl.memory_id)
            self.index[sl.memory_id] = b
            self.stats.append({})
            self.engine.append(None)
            for level in self.levels.values():
                s = level.seg
                level.seg = Segments(
                    np.append(s.starts, s.size), np.append(s.lengths, 0), np.append(s.capacity, 0), s.size
                )
        self.stats[b] = dict(sl.stats)
        self.engine[b] = _copy_state(sl.engine)
        was = {lv: (int(self.levels[lv].seg.starts[b]), int(self.levels[lv].seg.lengths[b])) for lv in LEVELS}
        for lv in LEVELS:  # place every level first: row references need the new starts
            self._place(lv, b, sl.n(lv), slack)
        starts = {lv: int(self.levels[lv].seg.starts[b]) for lv in LEVELS}
        for lv in LEVELS:
            level = self.levels[lv]
            start, n = starts[lv], sl.n(lv)
            # rows as they were but for ``changed`` (a memory moved, or a reference's level moved: all)
            kept = changed is not None and all(starts[t] == was[t][0] for t in (lv, *_REF_TARGETS[lv]))
            noted: list[tuple[int, int]] = []
            for name, a in sl.cols[lv].items():
                col = level.cols[name]
                if a.ndim == 2 and COLUMNS[lv][name][1] in ("w", "k") and a.shape[1] > col.shape[1]:
                    col = level.cols[name] = pad_width(col, a.shape[1], _fill_value(name, col.dtype))
                key = f"{lv}.{name}"
                if kept and key in _STORED_KEYS:
                    rows = changed.get(key)
                    if rows is None:
                        continue
                    rows = np.arange(rows, n) if isinstance(rows, int) else np.asarray(rows, np.int64)
                    a = a[rows]
                else:
                    rows = None
                if a.ndim == 2 and a.shape[1] < col.shape[1]:
                    a = pad_width(a, col.shape[1], _fill_value(name, col.dtype))
                target = ROW_REFS.get((lv, name))
                first = int(self.levels[target].seg.starts[b]) if target is not None else 0
                if rows is None:
                    dst = col[start : start + n]
                    dst[...] = a
                    if first:  # local rows of another level to global ones (-1 stays -1)
                        np.add(dst, dst.dtype.type(first), out=dst, where=dst >= 0)
                    noted.append((start, start + n))
                else:
                    col[start + rows] = np.where(a >= 0, a + a.dtype.type(first), a) if first else a
                    noted += [(start + int(r), start + int(r) + 1) for r in rows[:_NOTE_ROWS]]
                    if rows.shape[0] > _NOTE_ROWS:
                        noted.append((start + int(rows[_NOTE_ROWS:].min()), start + int(rows.max()) + 1))
            # slack holds nothing: past the rows, up to the capacity (kept in place: up to the old rows,
            # past which it was already empty)
            stop = start + (max(n, was[lv][1]) if kept else int(level.seg.capacity[b]))
            for name, col in level.cols.items():
                col[start + n : stop] = _fill_value(name, col.dtype)
            if kept:  # the level's written rows, merged: a few ranges a write (the log stays long)
                ranges = merged_ranges([*noted, (start + n, stop)])
                if len(ranges) > _NOTE_ROWS:
                    ranges = [(ranges[0][0], ranges[-1][1])]
                for lo, hi in ranges:
                    level.writes.note(lo, hi)
            else:
                level.writes.note(start, start + int(level.seg.capacity[b]))
        return b

    def _place(self, lv: str, b: int, n: int, slack: float) -> None:
        level = self.levels[lv]
        s = level.seg
        if n <= s.capacity[b]:
            s.lengths[b] = n
            return
        cap = n + max(4, int(np.ceil(n * slack)))
        old = int(s.starts[b]), int(s.capacity[b])
        last = old[0] + old[1] == s.size  # the arena's last segment grows where it is: no move, no hole
        start = old[0] if last else s.size
        if start + cap > level.rows_allocated:  # grow the arena geometrically (amortised)
            new_rows = max(start + cap, int(level.rows_allocated * 1.5) + 16)
            for name, col in level.cols.items():
                grown = np.full((new_rows, *col.shape[1:]), _fill_value(name, col.dtype), dtype=col.dtype)
                grown[: col.shape[0]] = col
                level.cols[name] = grown
            level.norms.clear()  # they hold the replaced columns
        if not last:
            for name, col in level.cols.items():  # the old rows become a hole
                col[old[0] : old[0] + old[1]] = _fill_value(name, col.dtype)
            level.writes.note(old[0], old[0] + old[1])
        s.starts[b], s.lengths[b], s.capacity[b], s.size = start, n, cap, start + cap

    def release(self) -> None:
        """Drop the values derived from rows (``Level.rows_cache``). Their functions refer back to
        the levels, a reference cycle the garbage collector frees only at a full collection, and
        with it every column of the bank: a bank being replaced calls this so its arrays go as soon
        as nothing reads it (an engine under a residency budget replaces its bank at each eviction)."""
        for level in self.levels.values():
            level.derived.clear()

    def without(self, memory_ids: set[str]) -> Bank:
        """A compact copy without ``memory_ids`` (a cost of the rows kept, not of the store)."""
        keep = [b for b, m in enumerate(self.memory_ids) if m not in memory_ids]
        return Bank.from_slices([self.slice(b) for b in keep], self.dim)

    def wasted_rows(self) -> tuple[int, int]:
        """(hole rows: arena rows no memory reserves, live rows), over every level. A memory that
        outgrows its segment moves and leaves a hole (the arena's last segment grows where it is), so
        growing memories' arena can hold several times their rows until ``compact``. A memory's spare
        room (its slack) is not counted: it is where the memory grows next."""
        used = sum(level.seg.size for level in self.levels.values())
        reserved = sum(int(level.seg.capacity.sum()) for level in self.levels.values())
        live = sum(int(level.seg.lengths.sum()) for level in self.levels.values())
        return used - reserved, live

    def compact(self) -> Bank:
        """A compact copy (plain CSR segments in memory order, no slack or holes)."""
        return Bank.from_slices([self.slice(b) for b in range(self.n_memories)], self.dim)
