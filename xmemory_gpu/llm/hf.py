"""transformers reader in process (CPU, or GPU in bf16): batched greedy decoding with left
padding and full logits; entropy and NLL per step through ``xmemory_gpu.ops.entropy``."""

from __future__ import annotations

import os
from pathlib import Path

from ..ops.entropy import token_entropy_logprob
from .base import UNCERTAINTY_KINDS, Generation, Uncertainty, Usage


class HFReader:
    """``path``: a model folder or hub id (offline); ``gguf_file``: a GGUF file inside it."""

    additive = False  # BPE tokenizers do not count a concatenation as the sum of its parts

    def __init__(self, path: str | Path, *, gguf_file: str | None = None, device: str | None = None, batch_size: int = 8) -> None:
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
        self.usage = Usage()

    # -- text helpers ------------------------------------------------------------------------------
    def chat(self, user: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
        return user

    def count(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]] if texts else []

    # -- decoding ----------------------------------------------------------------------------------
    def _greedy(self, prompts: list[str], n: int):
        """Yield, per prompt: (prompt token count, generated ids up to and including EOS, logits [t, V])."""
        import torch

        eos = self.tokenizer.eos_token_id
        for s in range(0, len(prompts), self.batch_size):
            chunk = prompts[s : s + self.batch_size]
            enc = self.tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
            with torch.no_grad():
                out = self.model.generate(
                    **enc, max_new_tokens=n, do_sample=False, output_logits=True, return_dict_in_generate=True,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            gen = out.sequences[:, enc["input_ids"].shape[1] :]
            logits = torch.stack(out.logits, dim=1)  # [b, steps, V]
            for i in range(len(chunk)):
                ids = gen[i].tolist()
                t = len(ids)
                if eos is not None and eos in ids:
                    t = ids.index(eos) + 1
                yield int(enc["attention_mask"][i].sum()), ids[:t], logits[i, :t]

    def generate(self, prompts: list[str], max_tokens: int = 32, temperature: float = 0.0, purpose: str = "generate") -> Generation:
        if temperature != 0.0:
            raise ValueError("HFReader.generate: only greedy decoding (temperature 0) is supported")
        texts, p_tok, o_tok = [], [], []
        for n_prompt, ids, _ in self._greedy(list(prompts), max_tokens):
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
            p_tok.append(n_prompt)
            o_tok.append(len(ids))
        self.usage.add(purpose, len(prompts), sum(p_tok), sum(o_tok))
        return Generation(texts, p_tok, o_tok)

    def uncertainty(self, prompts: list[str], n_tokens: int = 20, kind: str = "mean_nll", purpose: str = "uncertainty") -> list[Uncertainty]:
        if kind not in UNCERTAINTY_KINDS:
            raise ValueError(f"uncertainty kind must be one of {UNCERTAINTY_KINDS}, got {kind!r}")
        out = []
        for n_prompt, ids, logits in self._greedy(list(prompts), n_tokens):
            ent, lp = token_entropy_logprob(logits, ids)
            ent, lp = ent.double().cpu().tolist(), lp.double().cpu().tolist()
            per = ent if kind == "entropy" else [-v for v in lp]
            out.append(Uncertainty(sum(per) / len(per) if per else 0.0, kind, ent, lp, ids, n_prompt))
        self.usage.add(purpose, len(prompts), sum(u.prompt_tokens for u in out), sum(len(u.token_ids) for u in out))
        return out
