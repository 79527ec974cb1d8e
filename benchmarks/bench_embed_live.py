"""The default embedder (all-MiniLM-L6-v2) on the live path, CPU: one short
message embedded with the dense layers on ``ops.linear`` (batch-invariant, no filler: what the
engine does now) against one plain sentence-transformers forward of the same message (BLAS dense
layers, the unit compared) and the rule it replaces (BLAS, the forward filled with copies up to 256
tokens); a bulk call of 400 chat texts the same three ways; and a one-message ``MemoryEngine.add``
with the default embedder against the same add with ``hashing:384``.
Run: ``python -m pytest benchmarks/bench_embed_live.py --benchmark-columns=min,median,rounds``;
repeat to interleave; compare medians."""

from __future__ import annotations

import itertools
import os
import tempfile

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from xmemory_gpu.embed import load_embedder
from xmemory_gpu.embed.base import distinct_texts, normalize_rows, same_length_batches
from xmemory_gpu.embed.sentence_transformers import MIN_BATCH_TOKENS, default_model_path
from xmemory_gpu.engine import MemoryEngine

os.environ.setdefault("HF_HUB_OFFLINE", "1")
MESSAGE = "I left the hospital and now I work as a product designer at Google, {}."  # ~26 tokens
_count = itertools.count()


def _message() -> str:
    return MESSAGE.format(next(_count))  # a new text each call: nothing is cached


def _bulk_texts() -> list[str]:
    rng = np.random.default_rng(7)
    words = (
        "I went to the park with my dog yesterday and it rained a lot so we came back early "
        "Caroline said her support group meets on Tuesdays at the library near the station"
    ).split()
    return [" ".join(rng.choice(words, int(rng.integers(3, 60)))) for _ in range(400)]


@pytest.fixture(scope="module")
def models():
    ours = load_embedder("all-MiniLM-L6-v2")
    if not ours.rowwise:
        pytest.skip("the C++ module is not built")
    return ours, SentenceTransformer(str(default_model_path()), device="cpu")


def _filled(plain: SentenceTransformer, texts: list[str]) -> np.ndarray:
    """The rule before ops.linear: same-length batches filled with copies up to 256 tokens."""
    uniq, inverse = distinct_texts(texts)
    lengths = np.array(
        [len(ids) for ids in plain.tokenizer(uniq, truncation=True, max_length=256)["input_ids"]]
    )
    out = np.empty((len(uniq), 384), np.float32)
    for n_tokens, rows in same_length_batches(lengths, 64):
        batch = [uniq[i] for i in rows]
        batch += [batch[-1]] * max(0, min(64, -(-MIN_BATCH_TOKENS // n_tokens)) - len(batch))
        out[rows] = plain.encode(batch, batch_size=len(batch), convert_to_numpy=True)[: len(rows)]
    return normalize_rows(out)[inverse]


@pytest.mark.parametrize("how", ["plain_forward", "ours", "filled_256"])
def test_one_message(benchmark, models, how):
    ours, plain = models
    run = {
        "plain_forward": lambda: plain.encode([_message()], convert_to_numpy=True),
        "ours": lambda: ours.encode([_message()]),
        "filled_256": lambda: _filled(plain, [_message()]),
    }[how]
    benchmark.pedantic(run, rounds=25, warmup_rounds=3)


@pytest.mark.parametrize("how", ["plain_forward", "ours", "filled_256"])
def test_bulk_400_texts(benchmark, models, how):
    ours, plain = models
    texts = _bulk_texts()
    run = {
        "plain_forward": lambda: plain.encode(texts, batch_size=64, convert_to_numpy=True),
        "ours": lambda: ours.encode(texts),
        "filled_256": lambda: _filled(plain, texts),
    }[how]
    benchmark.pedantic(run, rounds=3, warmup_rounds=1)


@pytest.mark.parametrize("embedder", ["all-MiniLM-L6-v2", "hashing:384"])
def test_engine_add_one_message(benchmark, models, embedder):
    """A one-message add to a memory that already holds a short chat (store in a temp folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        emb = models[0] if embedder == "all-MiniLM-L6-v2" else embedder
        with MemoryEngine.open(os.path.join(tmp, "s"), embedder=emb) as mem:
            mem.add(
                [
                    {
                        "role": "user",
                        "content": "Hi! I'm Priya. I work as a night-shift nurse at St. Mary's.",
                    },
                    {"role": "assistant", "content": "Nice to meet you, Priya."},
                ],
                user_id="u1",
            )
            benchmark.pedantic(
                lambda: mem.add([{"role": "user", "content": _message()}], user_id="u1"),
                rounds=15,
                warmup_rounds=2,
            )
