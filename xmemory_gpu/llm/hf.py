"""transformers reader in process (CPU, or GPU in bf16): batched greedy decoding with left
padding and full logits; entropy and NLL per step through ``xmemory_gpu.ops.entropy``. Prompts
that share a long token prefix (a query's Stage II probes) compute it once: the prefix's KV cache
is copied into each batch, and the suffixes are left-padded after it."""

from __future__ import annotations

import os
from pathlib import Path

from ..ops.entropy import token_entropy_logprob
from .base import UNCERTAINTY_KINDS, Generation, Uncertainty, Usage, chat_prompt, count_tokens


def _prefix_groups(ids: list[list[int]], min_prefix: int) -> list[tuple[int, int, int]]:
    """Split prompts (token ids, in order) into runs ``(start, end, prefix_len)`` of consecutive
    prompts whose common token prefix is at least ``min_prefix`` long (prefix_len 0: no reuse).
    A run takes the next prompt only if that does not lower the tokens it saves (prefix x (n - 1)),
    so a shared instruction does not swallow the longer prefixes of each query's probes. The
    prefix is kept one token short of the shortest prompt, so every row has a suffix."""
    out: list[tuple[int, int, int]] = []
    i = 0
    while i < len(ids):
        j, lcp = i + 1, len(ids[i]) - 1
        while j < len(ids) and min_prefix > 0:
            a, b = ids[i], ids[j]
            k = 0
            m = min(lcp, len(b) - 1)
            while k < m and a[k] == b[k]:
                k += 1
            if k < min_prefix or k * (j - i) < lcp * (j - i - 1):
                break
            lcp, j = k, j + 1
        out.append((i, j, lcp if j - i > 1 else 0))
        i = j
    return out


class HFReader:
    """``path``: a model folder or hub id (offline); ``gguf_file``: a GGUF file inside it."""

    additive = False  # BPE tokenizers do not count a concatenation as the sum of its parts

    def __init__(
        self,
        path: str | Path,
        *,
        gguf_file: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        min_prefix: int = 32,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), **kw)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, **kw).to(self.device).eval()
        self.name = f"hf:{path}" + (f"#{gguf_file}" if gguf_file else "")
        self.batch_size = batch_size
        self.min_prefix = (
            min_prefix  # shared-prefix reuse for runs of prompts sharing this many tokens (0: off)
        )
        self.usage = Usage()

    # -- text helpers ------------------------------------------------------------------------------
    def chat(self, user: str) -> str:
        return chat_prompt(self.tokenizer, user)

    def count(self, texts: list[str]) -> list[int]:
        return count_tokens(self.tokenizer, texts)

    # -- decoding ----------------------------------------------------------------------------------
    def _greedy(self, prompts: list[str], n: int):
        """Yield, per prompt in order: (prompt token count, generated ids up to and including EOS,
        logits [t, V]). Runs of prompts sharing a token prefix of at least ``min_prefix`` tokens
        (a query's probes) compute that prefix once and decode from copies of its KV cache."""
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        for start, end, p in _prefix_groups(ids, self.min_prefix):
            cache = self._prefix_cache(ids[start][:p]) if p else None
            for s in range(start, end, self.batch_size):
                yield from self._decode(ids[s : min(s + self.batch_size, end)], n, p, cache)
            if p:
                self.usage.cached_prompt_tokens += p * (end - start - 1)

    def _prefix_cache(self, prefix: list[int]):
        import torch

        with torch.no_grad():
            return self.model(torch.tensor([prefix], device=self.device), use_cache=True).past_key_values

    def _decode(self, rows: list[list[int]], n: int, p: int, cache):
        """Greedy decoding of one batch; with a prefix cache, rows are [prefix | left pads | suffix]."""
        import copy

        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(r) for r in rows) - p
        input_ids = torch.full((len(rows), p + width), pad, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for i, r in enumerate(rows):
            input_ids[i, :p] = torch.tensor(r[:p])
            input_ids[i, p + width - (len(r) - p) :] = torch.tensor(r[p:])
            mask[i, :p] = 1
            mask[i, p + width - (len(r) - p) :] = 1
        kw = {}
        if cache is not None:
            past = copy.deepcopy(cache)
            past.batch_repeat_interleave(len(rows))
            kw["past_key_values"] = past
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                max_new_tokens=n,
                do_sample=False,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=pad,
                **kw,
            )
        gen = out.sequences[:, input_ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1)  # [b, steps, V]
        eos = self.tokenizer.eos_token_id
        for i, r in enumerate(rows):
            g = gen[i].tolist()
            t = g.index(eos) + 1 if eos is not None and eos in g else len(g)
            yield len(r), g[:t], logits[i, :t]

    def generate(
        self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate"
    ) -> Generation:
        if temperature != 0.0:
            raise ValueError("HFReader.generate: only greedy decoding (temperature 0) is supported")
        texts, p_tok, o_tok = [], [], []
        for n_prompt, ids, _ in self._greedy(list(prompts), max_tokens):
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
            p_tok.append(n_prompt)
            o_tok.append(len(ids))
        self.usage.add(purpose, len(prompts), sum(p_tok), sum(o_tok))
        return Generation(texts, p_tok, o_tok)

    def uncertainty(
        self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty"
    ) -> list[Uncertainty]:
        if kind not in UNCERTAINTY_KINDS:
            raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
        out = []
        for n_prompt, ids, logits in self._greedy(list(prompts), n_tokens):
            ent, lp = token_entropy_logprob(logits, ids)
            ent, lp = ent.double().cpu().tolist(), lp.double().cpu().tolist()
            per = ent if kind == "entropy" else [-v for v in lp]
            out.append(Uncertainty(sum(per) / len(per) if per else 0.0, kind, ent, lp, ids, n_prompt))
        self.usage.add(
            purpose, len(prompts), sum(u.prompt_tokens for u in out), sum(len(u.token_ids) for u in out)
        )
        return out
