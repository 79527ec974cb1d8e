"""Stage II's uncertainty gate with the ``hf`` reader and the ``vllm`` reader on the same weights, same
machine, same run: seconds per question, probe tokens per second, prefix-cache hit rate, and how far
the two readers' uncertainty drops and admissions differ. Run in .venv-vllm (scripts/setup-vllm.sh):

    .venv/bin/python benchmarks/bench_reader_vllm.py convert --out models/smollm2-f32   # GGUF -> safetensors (needs gguf)
    .venv-vllm/bin/python benchmarks/bench_reader_vllm.py run STORE --data locomo_dev.json \\
        --model models/smollm2-f32 --sample 24 --out DIR

The questions are sampled as ``benchmarks/stage2_thresholds.py`` samples them (every n-th
non-adversarial question); every pooled episode is probed (nothing filtered), then the default
admission walk is replayed on each reader's drops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path


def convert(out: Path) -> Path:
    """SmolLM2-135M-Instruct's GGUF (``xmemory models fetch``) dequantised to float32 safetensors."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xmemory_gpu.llm.models import SMOLLM2_GGUF, fetch_smollm2

    src = fetch_smollm2()
    tok = AutoTokenizer.from_pretrained(src, gguf_file=SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    for attr in (
        "quantization_config",
        "_pre_quantization_dtype",
    ):  # dequantised: save as plain float32 weights
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    model.hf_quantizer = None
    model.is_quantized = False
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


def probe(store: str, data: str, reader, sample: int, categories=(1, 2, 3, 4)) -> dict:
    from xmemory_gpu.config import XMemoryConfig
    from xmemory_gpu.eval.runner import load_questions
    from xmemory_gpu.memory.store import Store
    from xmemory_gpu.retrieve import Retriever

    st = Store.open(store)
    ids, cfg = st.memory_ids(), XMemoryConfig.from_dict(st.config)
    st.close()
    qs = load_questions(data, ids, categories, None)
    step = max(1, len(qs) // sample)
    qs = qs[::step][:sample]
    cfg.stage2 = replace(cfg.stage2, include_threshold=-1e9, early_stop_first=0)  # walk every probe
    r = Retriever.from_store(store, sorted({q["sample_id"] for q in qs}), reader=reader, config=cfg)
    u0 = (
        reader.usage.prompt_tokens,
        reader.usage.output_tokens,
        reader.usage.cached_prompt_tokens,
        reader.usage.calls,
    )
    t0 = time.perf_counter()
    res = r.search([q["question"] for q in qs], [q["sample_id"] for q in qs], strategy="xmemory")
    seconds = time.perf_counter() - t0
    u = reader.usage
    prompt, output, cached, calls = (
        u.prompt_tokens - u0[0],
        u.output_tokens - u0[1],
        u.cached_prompt_tokens - u0[2],
        u.calls - u0[3],
    )
    drops = [[e.scores["uncertainty_drop"] for e in x.units if e.type == "episode"] for x in res]
    return {
        "reader": reader.name,
        "questions": len(qs),
        "seconds": seconds,
        "probes": calls,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "cached_prompt_tokens": cached,
        "drops": drops,
        "kind": cfg.stage2.uncertainty,
        "qa": [(q["sample_id"], q["qa_index"]) for q in qs],
    }


def run(a: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from xmemory_gpu.config import XMemoryConfig
    from xmemory_gpu.llm.hf import HFReader
    from xmemory_gpu.llm.vllm import VLLMReader
    from xmemory_gpu.retrieve.gate import walk_independent

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in a.readers.split(","):
        t0 = time.perf_counter()
        if name == "hf":
            reader = HFReader(a.model)
        elif name == "vllm":
            reader = VLLMReader(
                a.model, logprobs=a.logprobs, max_model_len=a.max_model_len, kv_cache_gib=a.kv_cache_gib
            )
        else:
            raise SystemExit(f"unknown reader {name!r}: expected hf or vllm")
        load_s = time.perf_counter() - t0
        if a.warmup:
            reader.uncertainty([reader.chat("warm up")], n_tokens=4)
        res = probe(a.store, a.data, reader, a.sample)
        res["load_seconds"] = load_s
        results[name] = res
        (out / f"probes_{name}.json").write_text(json.dumps(res, indent=1))
        print(summary_line(name, res), flush=True)
        del reader
    lines = [
        "| reader | questions | s / question | probes | probe tokens / s (prompt + output) | output tokens / s "
        "| prefix-cache hit rate | load s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(table_row(name, r))
    if "hf" in results and "vllm" in results:
        base = XMemoryConfig().stage2
        h, v = results["hf"]["drops"], results["vllm"]["drops"]
        diffs = [abs(x - y) for qh, qv in zip(h, v) for x, y in zip(qh, qv)]
        same = sum(
            [ok for _, ok, _ in walk_independent(qh, base)] == [ok for _, ok, _ in walk_independent(qv, base)]
            for qh, qv in zip(h, v)
        )
        lines += [
            "",
            f"Drops ({results['hf']['kind']}) over {len(diffs)} episodes: max |hf - vllm| = {max(diffs):.2e}, "
            f"median {statistics.median(diffs):.2e}; default walk (include_threshold {base.include_threshold}) "
            f"admits the same episodes for {same} of {len(h)} questions.",
        ]
    text = "\n".join(lines) + "\n"
    (out / "bench.md").write_text(text)
    print(text)


def summary_line(name: str, r: dict) -> str:
    return (
        f"{name}: {r['questions']} questions in {r['seconds']:.1f} s, {r['probes']} probes, "
        f"{r['prompt_tokens']} prompt + {r['output_tokens']} output tokens, {r['cached_prompt_tokens']} cached"
    )


def table_row(name: str, r: dict) -> str:
    s = r["seconds"]
    return (
        f"| {name} | {r['questions']} | {s / r['questions']:.2f} | {r['probes']} | "
        f"{(r['prompt_tokens'] + r['output_tokens']) / s:.0f} | {r['output_tokens'] / s:.1f} | "
        f"{r['cached_prompt_tokens'] / max(1, r['prompt_tokens']):.2f} | {r['load_seconds']:.0f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert", help="SmolLM2-135M-Instruct GGUF -> float32 safetensors folder")
    c.add_argument("--out", required=True)
    r = sub.add_parser("run", help="the Stage II gate with each reader")
    r.add_argument("store")
    r.add_argument("--data", required=True)
    r.add_argument("--model", required=True, help="a safetensors model folder (see convert)")
    r.add_argument("--readers", default="hf,vllm")
    r.add_argument("--sample", type=int, default=24)
    r.add_argument(
        "--logprobs", type=int, default=20, help="vllm: top-K logprobs, or -1 for the whole vocabulary"
    )
    r.add_argument("--max-model-len", type=int, default=4096)
    r.add_argument("--kv-cache-gib", type=float, default=1.0)
    r.add_argument("--warmup", action="store_true")
    r.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "convert":
        print(convert(Path(a.out)))
    else:
        run(a)


if __name__ == "__main__":
    main()
