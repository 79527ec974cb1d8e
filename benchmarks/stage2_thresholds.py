"""Stage II thresholds by measurement: probe every pooled episode of a sample of LoCoMo questions
once with the reader (independent probes, nothing filtered), then replay the admission walk offline
for a grid of ``include_threshold`` values (the same ``walk_independent`` the retriever uses) and
report evidence recall, unit tokens and episodes admitted for each, plus how the uncertainty drop
separates episodes holding evidence from the others.

    python benchmarks/stage2_thresholds.py STORE --data locomo_dev.json --reader smollm2 --sample 24 --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path

from xmemory_gpu.config import XMemoryConfig
from xmemory_gpu.eval.retrieval_metrics import evidence_recall
from xmemory_gpu.eval.runner import load_questions
from xmemory_gpu.llm import load_reader
from xmemory_gpu.memory.store import Store
from xmemory_gpu.retrieve import Retriever
from xmemory_gpu.retrieve.gate import walk_independent

GRID = [-1e9, -0.4, -0.2, -0.1, 0.0, 0.05, 0.1, 0.2, 0.4]


def probe(store: str, data: str, reader_spec: str, sample: int, categories=(1, 2, 3, 4)) -> dict:
    st = Store.open(store)
    ids, cfg = st.memory_ids(), XMemoryConfig.from_dict(st.config)
    st.close()
    qs = load_questions(data, ids, categories, None)
    step = max(1, len(qs) // sample)
    qs = qs[::step][:sample]
    cfg.stage2 = replace(cfg.stage2, include_threshold=-1e9, early_stop_first=0)  # walk every probe
    reader = load_reader(reader_spec)
    r = Retriever.from_store(store, sorted({q["sample_id"] for q in qs}), reader=reader, config=cfg)
    t0 = time.perf_counter()
    res = r.search([q["question"] for q in qs], [q["sample_id"] for q in qs], strategy="xmemory")
    seconds = time.perf_counter() - t0
    rows = []
    for q, x in zip(qs, res):
        sem = [u for u in x.units if u.type == "semantic"]
        epi = [u for u in x.units if u.type == "episode"]
        rows.append(
            {
                "sample_id": q["sample_id"],
                "qa_index": q["qa_index"],
                "category": q["category"],
                "evidence": q["evidence"],
                "semantic_ids": sorted({m for u in sem for m in u.message_ids}),
                "semantic_tokens": sum(u.tokens for u in sem),
                "episodes": [
                    {
                        "id": u.id,
                        "drop": u.scores["uncertainty_drop"],
                        "tokens": u.tokens,
                        "message_ids": u.message_ids,
                        "holds_evidence": bool(set(u.message_ids) & set(q["evidence"])),
                    }
                    for u in epi
                ],
                "llm_calls": x.llm_calls,
                "llm_tokens": x.llm_tokens,
            }
        )
    return {
        "reader": reader.name,
        "questions": len(qs),
        "seconds": seconds,
        "config": cfg.stage2.__dict__,
        "rows": rows,
        "cached_prompt_tokens": reader.usage.cached_prompt_tokens,
        "prompt_tokens": reader.usage.prompt_tokens,
    }


def replay(rows: list[dict], include: float, base: XMemoryConfig) -> dict:
    cfg = replace(base.stage2, include_threshold=include)
    rec, tok, n_adm = [], [], []
    for row in rows:
        walk = walk_independent([e["drop"] for e in row["episodes"]], cfg)
        adm = [e for e, (_, ok, _) in zip(row["episodes"], walk) if ok]
        ids = set(row["semantic_ids"]) | {m for e in adm for m in e["message_ids"]}
        rec.append(evidence_recall(ids, row["evidence"]))
        tok.append(row["semantic_tokens"] + sum(e["tokens"] for e in adm))
        n_adm.append(len(adm))
    rec = [v for v in rec if v is not None]
    return {
        "include_threshold": include,
        "recall": statistics.fmean(rec),
        "unit_tokens": statistics.fmean(tok),
        "episodes_admitted": statistics.fmean(n_adm),
    }


def report(probes: dict) -> str:
    base = XMemoryConfig()
    rows = probes["rows"]
    drops_ev = [e["drop"] for r in rows for e in r["episodes"] if e["holds_evidence"]]
    drops_no = [e["drop"] for r in rows for e in r["episodes"] if not e["holds_evidence"]]
    sem_only = statistics.fmean(
        v for v in (evidence_recall(r["semantic_ids"], r["evidence"]) for r in rows) if v is not None
    )
    lines = [
        f"Stage II probes: {probes['questions']} questions, reader {probes['reader']}, {probes['seconds']:.0f} s "
        f"({probes['questions'] / probes['seconds']:.3f} q/s), {statistics.fmean(r['llm_calls'] for r in rows):.1f} calls and "
        f"{statistics.fmean(r['llm_tokens'] for r in rows):.0f} tokens per question, "
        f"{probes['cached_prompt_tokens']} of {probes['prompt_tokens']} prompt tokens from shared-prefix caches.",
        "",
        f"Uncertainty drop (nats, {probes['config']['uncertainty']}): episodes holding evidence "
        f"mean {statistics.fmean(drops_ev) if drops_ev else float('nan'):.3f} (n={len(drops_ev)}), others "
        f"mean {statistics.fmean(drops_no) if drops_no else float('nan'):.3f} (n={len(drops_no)}).",
        f"Stage I semantics alone: evidence recall {sem_only:.3f}.",
        "",
        "| include_threshold | evidence recall | unit tokens | episodes admitted |",
        "|---|---|---|---|",
    ]
    for t in GRID:
        s = replay(rows, t, base)
        label = "all (no gate)" if t < -1e8 else f"{t:g}"
        lines.append(
            f"| {label} | {s['recall']:.3f} | {s['unit_tokens']:.0f} | {s['episodes_admitted']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--data", required=True)
    ap.add_argument("--reader", default="smollm2")
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay", action="store_true", help="only replay the probes already in OUT/probes.json")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not a.replay:
        (out / "probes.json").write_text(json.dumps(probe(a.store, a.data, a.reader, a.sample), indent=1))
    text = report(json.loads((out / "probes.json").read_text()))
    (out / "thresholds.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
