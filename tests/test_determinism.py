"""The same input gives the same store whatever the shard size or the order of commits: a memory's
construction never depends on which other memories share its batch."""

from __future__ import annotations

import numpy as np

from xmemory_gpu.construct.pipeline import build_store
from xmemory_gpu.datasets.synthetic import generate_conversations, write_json
from xmemory_gpu.embed.hashing import HashingEmbedder
from xmemory_gpu.memory.store import Store


def _dump(path) -> dict:
    st = Store.open(path)
    out = {}
    for mid in st.memory_ids():
        m = st.get(mid)
        out[mid] = (
            [x.__dict__ for x in m.messages],
            [e.__dict__ for e in m.episodes],
            [s.__dict__ for s in m.semantics],
            [t.__dict__ for t in m.themes],
            {k: v.tolist() for k, v in m.arrays().items()},
            {k: v for k, v in m.stats.items() if k != "timings"},
        )
    st.close()
    return out


def test_shard_size_does_not_change_the_store(tmp_path):
    data = write_json(generate_conversations(7, seed=9, sessions=(2, 7)), tmp_path / "d.json")
    emb = HashingEmbedder(96)
    dumps = []
    for shard in (1, 3, 16):
        build_store(data, tmp_path / f"s{shard}", embedder=emb, shard_size=shard, progress=False)
        dumps.append(_dump(tmp_path / f"s{shard}"))
    assert dumps[0] == dumps[1] == dumps[2]
    assert np.mean([len(v[3]) for v in dumps[0].values()]) > 1  # themes were built
