"""``xmemory build INPUT... --out STORE``: bulk-build memories, resumable, with per-stage timings."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a memory store from LoCoMo-format JSON files or folders")
    p.add_argument("inputs", nargs="+", help="JSON files or folders of them (LoCoMo format)")
    p.add_argument("--out", required=True, help="store directory (created, or resumed if it exists)")
    p.add_argument("--limit", type=int, default=None, help="build at most this many conversations")
    p.add_argument("--embedder", default=None, help="embedder spec (default: all-MiniLM-L6-v2, shipped offline)")
    p.add_argument("--no-split", action="store_true", help="ablation: never split themes above the cap")
    p.add_argument("--no-merge", action="store_true", help="ablation: never merge small themes")
    p.add_argument("--builder", choices=["llm-free", "llm"], default="llm-free",
                   help="llm-free (default, no model) or llm (boundaries, episodes, facts and summaries by --llm)")
    p.add_argument("--llm", default="smollm2", help="generator spec for --builder llm (see `xmemory_gpu.llm.load_reader`)")
    p.add_argument("--llm-retries", type=int, default=2, help="stricter re-asks of a malformed answer before the LLM-free fallback")
    p.add_argument("--llm-batch-size", type=int, default=8, help="prompts per forward pass of an in-process generator")
    p.add_argument("--sessions", type=int, default=None, help="keep only the first N sessions of each conversation")
    p.add_argument("--shard-size", type=int, default=16, help="conversations built together before committing")
    p.add_argument("--backend", default="auto", help="kernel backend: auto, reference, cpu, triton, cuda")
    p.add_argument("--config", default=None, help="JSON file with settings overriding the defaults")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    p.set_defaults(func=run)


def load_config(path: str | None):
    from ..config import XMemoryConfig

    if path is None:
        return XMemoryConfig()
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    return XMemoryConfig.from_dict(data)


def run(args: argparse.Namespace) -> int:
    from ..construct.pipeline import build_store
    from ..embed import load_embedder

    cfg = load_config(args.config)
    if args.embedder:
        cfg.embed.model = args.embedder
    cfg.theme.split = cfg.theme.split and not args.no_split
    cfg.theme.merge = cfg.theme.merge and not args.no_merge
    llm = None
    if args.builder == "llm":
        from ..construct.llm_stages import LLMBuilder
        from ..llm import load_reader

        kw = {"batch_size": args.llm_batch_size} if args.llm == "smollm2" or args.llm.startswith("hf:") else {}
        llm = LLMBuilder(load_reader(args.llm, **kw), max_retries=args.llm_retries, segment=cfg.segment)
    report = build_store(
        args.inputs,
        args.out,
        config=cfg,
        embedder=load_embedder(cfg.embed.model),
        limit=args.limit,
        shard_size=args.shard_size,
        progress=not args.no_progress,
        backend=args.backend,
        llm=llm,
        max_sessions=args.sessions,
    )
    if args.json:
        print(json.dumps(report.__dict__ | ({"llm_usage": llm.gen.usage.__dict__} if llm else {}), indent=2))
        return 0
    print(f"built {len(report.built)} memories, skipped {len(report.skipped)} already in {args.out}, {report.wall_s:.1f} s")
    for stage, sec in report.timings.items():
        print(f"  {stage:16s} {sec:8.2f} s")
    if llm:
        u = llm.gen.usage
        print(f"LLM {llm.gen.name}: {u.calls} prompts, {u.prompt_tokens} prompt + {u.output_tokens} output tokens "
              "(per stage and memory: `xmemory stats STORE`)")
    return 0
