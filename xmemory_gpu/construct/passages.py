"""The passages of long messages for memories stored before the bank kept them (file format 3):
embedded once, in batched encoder calls, and written back, so searches never embed them.

``store_passages`` is what a writable engine open runs after ``Store.upgrade``; it reads each
format 3 memory, embeds its long messages' passages exactly as construction does
(``segment.embed_messages``: the same texts, so the same vectors), and commits the memories in
groups (each group one atomic commit; an interrupted run leaves the rest at format 3, still
searchable, and the next open goes on).
"""

from __future__ import annotations

import logging

import numpy as np

from ..memory.backend import MemoryBackend
from ..memory.bank import MemorySlice
from ..memory.records import Message
from ..text import passages
from .segment import embed_messages

COMMIT_GROUP = 64  # memories per commit
log = logging.getLogger(__name__)


def with_passages(sl: MemorySlice, embedder, max_words: int) -> MemorySlice:
    """``sl`` with the stored passages of its long messages (``psg`` level and ``msg.psg``); the
    message rows themselves are kept as stored."""
    m = sl.cols["msg"]
    long = [i for i, t in enumerate(m["text"].tolist()) if len(passages(str(t), max_words)) > 1]
    d = m["x"].shape[1]
    first = np.full(m["x"].shape[0], -1, np.int32)
    psg_x, psg_msg = np.zeros((0, d), np.float32), np.zeros(0, np.int32)
    if long:
        msgs = [Message(str(m["id"][i]), str(m["speaker"][i]), str(m["text"][i]), 0) for i in long]
        v = embed_messages(embedder, msgs, max_words)
        psg_x = v.psg_x
        psg_msg = np.asarray(long, np.int32)[v.psg_msg]
        starts = np.concatenate([[True], psg_msg[1:] != psg_msg[:-1]])
        first[psg_msg[starts]] = np.flatnonzero(starts)
    cols = {lv: dict(c) for lv, c in sl.cols.items()}
    cols["msg"]["psg"] = first
    cols["psg"] = {"x": psg_x.astype(np.float32), "msg": psg_msg}
    return MemorySlice(sl.memory_id, cols, dict(sl.stats), sl.engine)


def store_passages(backend: MemoryBackend, embedder, max_words: int, *, group: int = COMMIT_GROUP) -> int:
    """Embed and store the passages of every memory of ``backend`` stored at file format 3;
    returns how many memories were rewritten. The memories' other columns are unchanged. A memory
    that does not load is left as it is (logged; a load quarantines it as before)."""
    todo = [mid for mid, fmt in backend.formats().items() if fmt == 3]
    done = 0
    for lo in range(0, len(todo), group):
        out = []
        for mid in todo[lo : lo + group]:
            try:
                sl = backend.get_slice(mid)
            except (KeyError, ValueError, OSError) as exc:  # StoreError is a ValueError
                log.warning("memory %s: its passages are not stored (it does not load: %s)", mid, exc)
                continue
            out.append(with_passages(sl, embedder, max_words))
        if out:
            backend.commit(out, replace=True)
            done += len(out)
    return done


__all__ = ["COMMIT_GROUP", "store_passages", "with_passages"]
