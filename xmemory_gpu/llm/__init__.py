"""Readers with logit-level uncertainty. ``load_reader(spec, **kw)``:

- ``smollm2``: the embedded default, SmolLM2-135M-Instruct (fetched by ``xmemory models fetch``);
- ``hf:PATH_OR_ID[#FILE.gguf]``: any transformers causal LM in process (exact entropy);
- ``vllm:MODEL_ID``: vLLM in process, prefix caching on (``vllm.VLLMReader``; top-K entropy estimate);
- ``openai:BASE_URL#MODEL``: any OpenAI-compatible server's ``/v1/completions``, e.g.
  ``openai:http://localhost:8000/v1#Qwen/Qwen2.5-1.5B-Instruct`` (``openai.OpenAIReader``;
  top-K entropy estimate).

Keywords go to the reader's constructor. A spec that is no string, or an ``hf:`` model that is not
on this machine (a folder, or a hub id in the local Hugging Face cache: readers run offline), is
refused at once with a one-line ``ValueError`` naming ``reader``; ``as_reader`` takes a ``Reader``
or a spec (what ``MemoryEngine.open(reader=...)`` accepts).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .base import UNCERTAINTY_KINDS, Generation, Reader, Uncertainty, Usage

SPECS = "'smollm2', 'hf:PATH[#FILE.gguf]', 'vllm:MODEL_ID' or 'openai:BASE_URL#MODEL'"
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")  # name or org/name
_READER_METHODS = ("chat", "count", "generate", "uncertainty")


def _hf_model(spec: str, path: str, gguf: str) -> None:
    """Refuse an ``hf:`` spec whose model is not here: neither a folder (holding ``gguf`` when named)
    nor a hub id in the local cache."""
    if not path:
        raise ValueError(f"reader: {spec!r}: expected 'hf:PATH_OR_ID[#FILE.gguf]'")
    folder = Path(path).expanduser()
    if folder.is_dir():
        if gguf and not (folder / gguf).is_file():
            raise ValueError(f"reader: {spec}: no such file {folder / gguf}")
        return
    if folder.exists():
        raise ValueError(f"reader: {spec}: not a directory")
    if _HUB_ID.fullmatch(path):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = isinstance(try_to_load_from_cache(path, gguf or "config.json"), str)
        except Exception:  # noqa: BLE001 - no hub client, or an id it refuses: not cached
            cached = False
        if cached:
            return
        raise ValueError(f"reader: {spec}: no such directory, and not in the local Hugging Face cache")
    raise ValueError(f"reader: {spec}: no such directory")


def as_reader(value: Any) -> Reader | None:
    """``value`` as a reader: None, a ``Reader`` (an object with its methods), or a spec (``load_reader``)."""
    if value is None or isinstance(value, str):
        return None if value is None else load_reader(value)
    if all(callable(getattr(value, m, None)) for m in _READER_METHODS):
        return value
    raise ValueError(f"reader: expected a Reader or a spec ({SPECS}), got {type(value).__name__}")


def load_reader(spec: str, **kw) -> Reader:
    if not isinstance(spec, str):
        raise ValueError(f"reader: expected a spec string ({SPECS}), got {type(spec).__name__}")
    if spec == "smollm2":
        from .hf import HFReader
        from .models import SMOLLM2_GGUF, smollm2_dir

        d = smollm2_dir()
        if not (d / SMOLLM2_GGUF).exists():
            raise ValueError(
                f"the smollm2 reader is not fetched (no {d / SMOLLM2_GGUF}); run `xmemory models fetch`"
            )
        return HFReader(d, gguf_file=SMOLLM2_GGUF, **kw)
    if spec.startswith("hf:"):
        from .hf import HFReader

        path, _, gguf = spec[3:].partition("#")
        _hf_model(spec, path, gguf)
        return HFReader(path, gguf_file=gguf or None, **kw)
    if spec.startswith("vllm:"):
        from .vllm import VLLMReader

        if not spec[5:]:
            raise ValueError(f"reader spec {spec!r}: expected 'vllm:MODEL_ID'")
        return VLLMReader(spec[5:], **kw)
    if spec.startswith("openai:"):
        from .openai import OpenAIReader

        url, _, model = spec[7:].partition("#")
        if not url or not model:
            raise ValueError(
                f"reader spec {spec!r}: expected 'openai:BASE_URL#MODEL', e.g. 'openai:http://localhost:8000/v1#my-model'"
            )
        return OpenAIReader(url, model, **kw)
    raise ValueError(f"unknown reader spec {spec!r}: expected {SPECS}")


__all__ = ["UNCERTAINTY_KINDS", "Generation", "Reader", "Uncertainty", "Usage", "as_reader", "load_reader"]
