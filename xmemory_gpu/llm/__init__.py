"""Readers with logit-level uncertainty. ``load_reader(spec, **kw)``:

- ``smollm2``: the embedded default, SmolLM2-135M-Instruct (fetched by ``xmemory models fetch``);
- ``hf:PATH_OR_ID[#FILE.gguf]``: any transformers causal LM in process (exact entropy);
- ``vllm:MODEL_ID``: vLLM in process, prefix caching on (``vllm.VLLMReader``; top-K entropy estimate);
- ``openai:BASE_URL#MODEL``: any OpenAI-compatible server's ``/v1/completions``, e.g.
  ``openai:http://localhost:8000/v1#Qwen/Qwen2.5-1.5B-Instruct`` (``openai.OpenAIReader``;
  top-K entropy estimate).

Keywords go to the reader's constructor.
"""

from __future__ import annotations

from .base import UNCERTAINTY_KINDS, Generation, Reader, Uncertainty, Usage

SPECS = "'smollm2', 'hf:PATH[#FILE.gguf]', 'vllm:MODEL_ID' or 'openai:BASE_URL#MODEL'"


def load_reader(spec: str, **kw) -> Reader:
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


__all__ = ["UNCERTAINTY_KINDS", "Generation", "Reader", "Uncertainty", "Usage", "load_reader"]
