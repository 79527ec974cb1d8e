"""Embedders: all-MiniLM-L6-v2 (default, offline), any sentence-transformers model, feature hashing."""

from __future__ import annotations

from pathlib import Path

from .base import Embedder, encode_queries, normalize_rows
from .hashing import HashingEmbedder

__all__ = ["Embedder", "HashingEmbedder", "embedder_for_store", "encode_queries", "load_embedder", "normalize_rows"]


def load_embedder(spec: str = "all-MiniLM-L6-v2", *, device: str = "cpu", batch_size: int = 64) -> Embedder:
    """``all-MiniLM-L6-v2`` (default), ``hashing:DIM``, or ``st:PATH_OR_NAME`` (any sentence-transformers model)."""
    if spec.startswith("hashing"):
        _, _, dim = spec.partition(":")
        if dim and not (dim.isdigit() and int(dim) >= 1):
            raise ValueError(f"embedder {spec!r}: expected hashing:DIM with DIM an integer >= 1")
        return HashingEmbedder(int(dim) if dim else 64)
    from .sentence_transformers import DEFAULT_MODEL, SentenceTransformerEmbedder

    if spec == DEFAULT_MODEL:
        return SentenceTransformerEmbedder(DEFAULT_MODEL, device=device, batch_size=batch_size)
    if spec.startswith("st:"):
        target = spec[3:]
        if target.startswith(("/", ".", "~")) and not Path(target).expanduser().exists():
            raise ValueError(f"embedder {spec!r}: no model folder at {target}")
        return SentenceTransformerEmbedder(target, device=device, batch_size=batch_size)
    raise ValueError(f"unknown embedder spec {spec!r}: expected 'all-MiniLM-L6-v2', 'hashing:DIM' or 'st:PATH_OR_NAME'")


def embedder_for_store(name: str, *, device: str = "cpu") -> Embedder:
    """The embedder a store was built with, from the name it records (``hashing-64``, a model name or path)."""
    if name.startswith("hashing-"):
        return HashingEmbedder(int(name.split("-", 1)[1]))
    from .sentence_transformers import DEFAULT_MODEL

    return load_embedder(name if name == DEFAULT_MODEL else f"st:{name}", device=device)
