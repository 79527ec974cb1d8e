"""Embedders: all-MiniLM-L6-v2 (default, offline), any sentence-transformers model, the same model on
OpenVINO's CPU runtime in float32 or int8 (optional extra ``openvino``), feature hashing.

Importing this package, or constructing a sentence-transformers embedder, imports no torch: the model
loads once per process, in the background from ``warm_up`` or on first use (``embed.background``)."""

from __future__ import annotations

from pathlib import Path

from .background import EmbedderLoadError
from .base import Embedder, encode_queries, normalize_rows, warm_up
from .hashing import HashingEmbedder
from .sentence_transformers import DEFAULT_MODEL  # the module imports torch only when a model is loaded

__all__ = [
    "Embedder",
    "EmbedderLoadError",
    "HashingEmbedder",
    "check_embedder_spec",
    "embedder_for_store",
    "encode_queries",
    "load_embedder",
    "normalize_rows",
    "warm_up",
]


_OV = ("openvino", "ov", "ov-int8")


def check_embedder_spec(spec: str) -> None:
    """Raise the ``ValueError`` :func:`load_embedder` would raise for the form of ``spec`` (an unknown
    kind, a bad ``hashing`` dimension, a model folder that does not exist), without loading anything:
    a build with workers checks the spec it hands them."""
    if spec in _OV or spec.startswith(("ov:", "openvino:", "ov-int8:")):
        target = spec.partition(":")[2] or DEFAULT_MODEL
        if target != DEFAULT_MODEL and not Path(target).expanduser().is_dir():
            raise ValueError(f"embedder {spec!r}: no model folder at {target}")
    elif spec.startswith("hashing"):
        _, _, dim = spec.partition(":")
        if dim and not (dim.isdigit() and int(dim) >= 1):
            raise ValueError(f"embedder {spec!r}: expected hashing:DIM with DIM an integer >= 1")
    elif spec.startswith("st:"):
        target = spec[3:]
        if target.startswith(("/", ".", "~")) and not Path(target).expanduser().exists():
            raise ValueError(f"embedder {spec!r}: no model folder at {target}")
    elif spec != DEFAULT_MODEL:
        raise ValueError(
            f"unknown embedder spec {spec!r}: expected 'all-MiniLM-L6-v2', 'hashing:DIM', "
            "'st:PATH_OR_NAME', 'ov:all-MiniLM-L6-v2' / 'ov:PATH' or 'ov-int8:all-MiniLM-L6-v2' / 'ov-int8:PATH'"
        )


def load_embedder(
    spec: str = "all-MiniLM-L6-v2",
    *,
    device: str = "cpu",
    batch_size: int = 64,
    num_threads: int | None = None,
) -> Embedder:
    """``all-MiniLM-L6-v2`` (default), ``hashing:DIM``, ``st:PATH_OR_NAME`` (any sentence-transformers model),
    or ``openvino`` / ``ov:all-MiniLM-L6-v2`` / ``ov:PATH`` (a mean-pooling sentence-transformers model on
    OpenVINO's CPU runtime; always on the CPU, ``device`` is not used), or ``ov-int8`` / ``ov-int8:...``
    (the same, quantised to int8 weights and activations). ``num_threads``: OpenVINO's CPU threads
    (default: its choice; torch's follow ``OMP_NUM_THREADS``). A malformed spec raises ``ValueError``
    (:func:`check_embedder_spec`)."""
    check_embedder_spec(spec)
    if spec in _OV or spec.startswith(("ov:", "openvino:", "ov-int8:")):
        from .openvino import OpenVINOEmbedder

        target = spec.partition(":")[2] or DEFAULT_MODEL
        return OpenVINOEmbedder(
            target, batch_size=batch_size, int8=spec.startswith("ov-int8"), num_threads=num_threads
        )
    if spec.startswith("hashing"):
        dim = spec.partition(":")[2]
        return HashingEmbedder(int(dim) if dim else 64)
    from .sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        spec if spec == DEFAULT_MODEL else spec[3:], device=device, batch_size=batch_size
    )


def embedder_for_store(
    name: str, *, device: str = "cpu", num_threads: int | None = None, dim: int | None = None
) -> Embedder:
    """The embedder a store was built with, from the name it records (``hashing-64``, ``ov:MODEL``,
    ``ov-int8:MODEL``, a model name or path); ``num_threads`` as in :func:`load_embedder`. ``dim``:
    the store's recorded width, so a sentence-transformers model whose folder does not declare one
    (a hub name) need not load before the store opens (the loaded model is checked against it)."""
    if name.startswith("hashing-"):
        return HashingEmbedder(int(name.split("-", 1)[1]))
    if name.startswith(("ov:", "ov-int8:")):
        return load_embedder(name, num_threads=num_threads)
    spec = name if name == DEFAULT_MODEL else f"st:{name}"
    check_embedder_spec(spec)
    from .sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(name, device=device, expected_dim=dim)
