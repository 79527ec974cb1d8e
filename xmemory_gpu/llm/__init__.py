"""Readers with logit-level uncertainty. ``load_reader(spec)``:

- ``smollm2``: the embedded default, SmolLM2-135M-Instruct (fetched by ``xmemory models fetch``);
- ``hf:PATH_OR_ID[#FILE.gguf]``: any transformers causal LM in process.

vLLM and OpenAI-compatible backends are not built yet.
"""

from __future__ import annotations

from .base import UNCERTAINTY_KINDS, Generation, Reader, Uncertainty, Usage


def load_reader(spec: str, **kw) -> Reader:
    from .hf import HFReader
    from .models import SMOLLM2_GGUF, smollm2_dir

    if spec == "smollm2":
        d = smollm2_dir()
        if not (d / SMOLLM2_GGUF).exists():
            raise ValueError(f"the smollm2 reader is not fetched (no {d / SMOLLM2_GGUF}); run `xmemory models fetch`")
        return HFReader(d, gguf_file=SMOLLM2_GGUF, **kw)
    if spec.startswith("hf:"):
        path, _, gguf = spec[3:].partition("#")
        return HFReader(path, gguf_file=gguf or None, **kw)
    raise ValueError(f"unknown reader spec {spec!r}: expected 'smollm2' or 'hf:PATH[#FILE.gguf]' (vllm and openai are not built yet)")


__all__ = ["UNCERTAINTY_KINDS", "Generation", "Reader", "Uncertainty", "Usage", "load_reader"]
