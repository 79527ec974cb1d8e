"""vLLM reader in process: batched greedy decoding with top-K logprobs, prefix caching on (probes
that share a query's prefix reuse its KV cache).

Written against vLLM's documented offline API (0.8+, V1 engine): ``LLM(model=...,
enable_prefix_caching=True, max_logprobs=...)``, ``SamplingParams(temperature=0, max_tokens=n,
logprobs=K)``, ``LLM.generate(prompts, params)`` returning one ``RequestOutput`` per prompt in input
order, with ``prompt_token_ids`` and ``outputs[0].token_ids`` / ``outputs[0].logprobs`` (one
mapping ``token_id -> Logprob(logprob=...)`` per generated token: the top K plus the sampled token,
so up to K+1 entries; a plain list of dicts or a ``FlatLogprobs`` that indexes the same way).

Prompts are tokenized here without special tokens and given as ``{"prompt_token_ids": ...}``, as
the ``hf`` reader tokenizes them. ``mean_nll`` is exact; ``entropy`` is estimated from the top-K
logprobs with the remaining mass spread uniformly over the rest of the vocabulary
(:mod:`.topk_entropy`: an upper bound) and marked ``estimated=True``.

vLLM is imported in the constructor only: this module imports without it. The parsing of outputs
is in pure functions (:func:`uncertainty_from_output`, :func:`generation_from_output`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import UNCERTAINTY_KINDS, Generation, Uncertainty, Usage, chat_prompt, count_tokens
from .topk_entropy import entropy_from_topk


# -- output parsing (pure: duck-typed on RequestOutput / CompletionOutput / Logprob) -----------------
def _completion(out: Any) -> Any:
    outputs = getattr(out, "outputs", None)
    if not outputs:
        raise ValueError("vLLM RequestOutput has no outputs")
    return outputs[0]


def step_logprobs(step: Mapping[int, Any], token_id: int) -> tuple[float, list[float]]:
    """One generated position: (logprob of the sampled ``token_id``, logprobs of all distinct
    tokens given: the top K and the sampled one)."""
    if step is None or token_id not in step:
        raise ValueError(f"vLLM logprobs lack the sampled token {token_id} (were logprobs requested?)")
    return float(step[token_id].logprob), [float(v.logprob) for v in step.values()]


def uncertainty_from_output(out: Any, kind: str, vocab_size: int | None) -> Uncertainty:
    """An :class:`Uncertainty` from one ``RequestOutput`` generated with ``logprobs=K``."""
    if kind not in UNCERTAINTY_KINDS:
        raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
    comp = _completion(out)
    ids = [int(t) for t in comp.token_ids]
    steps: Sequence[Mapping[int, Any]] | None = comp.logprobs
    if steps is None or len(steps) != len(ids):
        raise ValueError(f"vLLM output has {0 if steps is None else len(steps)} logprob steps for {len(ids)} tokens")
    lp, ent = [], []
    for i, tid in enumerate(ids):
        sampled, top = step_logprobs(steps[i], tid)
        lp.append(sampled)
        ent.append(entropy_from_topk(top, vocab_size))
    per = ent if kind == "entropy" else [-v for v in lp]
    value = sum(per) / len(per) if per else 0.0
    return Uncertainty(value, kind, ent, lp, ids, len(out.prompt_token_ids), estimated=kind == "entropy")


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
    for get in (lambda: llm.llm_engine.model_config.get_vocab_size(), lambda: llm.llm_engine.get_model_config().get_vocab_size()):
        try:
            return int(get())
        except Exception:  # noqa: BLE001 - engine internals move between versions
            continue
    return len(tokenizer)


class VLLMReader:
    """``model``: a hub id or local folder; ``logprobs``: K for the entropy estimate (vLLM's
    ``max_logprobs`` is raised to it); other keywords go to ``vllm.LLM`` (``dtype``,
    ``gpu_memory_utilization``, ``max_model_len``, ...)."""

    additive = False

    def __init__(self, model: str, *, logprobs: int = 20, vocab_size: int | None = None, **engine_kw: Any) -> None:
        try:
            import vllm
        except ImportError as e:
            raise ImportError(
                f"the vllm reader needs vLLM (`pip install 'xmemory-gpu[vllm]'`, on a machine with a supported GPU): {e}"
            ) from e
        if logprobs < 1:
            raise ValueError("VLLMReader: logprobs must be >= 1")
        self._vllm = vllm
        kw = {"enable_prefix_caching": True, "max_logprobs": max(20, logprobs), **engine_kw}
        self.llm = vllm.LLM(model=model, **kw)
        self.tokenizer = self.llm.get_tokenizer()
        self.vocab_size = vocab_size if vocab_size is not None else _vocab_size(self.llm, self.tokenizer)
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
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"] if prompts else []
        params = self._vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=logprobs)
        return self.llm.generate([{"prompt_token_ids": list(x)} for x in ids], params, use_tqdm=False)

    def generate(self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate") -> Generation:
        if temperature != 0.0:
            raise ValueError("VLLMReader.generate: only greedy decoding (temperature 0) is supported")
        outs = self._generate(list(prompts), max_tokens, None)
        res = [generation_from_output(o, lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True)) for o in outs]
        gen = Generation([r[0] for r in res], [r[1] for r in res], [r[2] for r in res])
        self._record(purpose, outs, sum(gen.prompt_tokens), sum(gen.output_tokens))
        return gen

    def uncertainty(self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty") -> list[Uncertainty]:
        if kind not in UNCERTAINTY_KINDS:
            raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
        outs = self._generate(list(prompts), n_tokens, self.logprobs)
        res = [uncertainty_from_output(o, kind, self.vocab_size) for o in outs]
        self._record(purpose, outs, sum(u.prompt_tokens for u in res), sum(len(u.token_ids) for u in res))
        return res

    def _record(self, purpose: str, outs: list[Any], prompt: int, output: int) -> None:
        self.usage.add(purpose, len(outs), prompt, output)
        self.usage.cached_prompt_tokens += cached_tokens(outs)
