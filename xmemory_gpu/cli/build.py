"""``xmemory build INPUT... --out STORE [--ray [ADDRESS]]``: bulk-build memories, resumable, with per-stage timings
(on this machine, or on Ray Data with this process as the store's only writer)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a memory store from LoCoMo-format JSON files or folders")
    p.add_argument("inputs", nargs="+", help="JSON files or folders of them (LoCoMo format)")
    p.add_argument("--out", required=True, help="store directory (created, or resumed if it exists)")
    p.add_argument("--limit", type=int, default=None, help="build at most this many conversations")
    p.add_argument(
        "--embedder", default=None, help="embedder spec (default: all-MiniLM-L6-v2, shipped offline)"
    )
    p.add_argument("--no-split", action="store_true", help="ablation: never split themes above the cap")
    p.add_argument("--no-merge", action="store_true", help="ablation: never merge small themes")
    p.add_argument(
        "--builder",
        choices=["llm-free", "llm"],
        default="llm-free",
        help="llm-free (default, no model) or llm (boundaries, episodes, facts and summaries by --llm)",
    )
    p.add_argument(
        "--llm",
        default="smollm2",
        help="generator spec for --builder llm (see `xmemory_gpu.llm.load_reader`)",
    )
    p.add_argument(
        "--llm-retries",
        type=int,
        default=2,
        help="stricter re-asks of a malformed answer before the LLM-free fallback",
    )
    p.add_argument(
        "--llm-batch-size", type=int, default=8, help="prompts per forward pass of an in-process generator"
    )
    p.add_argument(
        "--sessions", type=int, default=None, help="keep only the first N sessions of each conversation"
    )
    p.add_argument(
        "--shard-size",
        type=int,
        default=64,
        help="conversations built together (one lockstep batch) before committing",
    )
    p.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="build shards in N worker processes on this machine (the same store; LLM-free builds only)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        help="kernel backend: auto, reference, cpu, triton, cuda (cuda / triton also run the encoder on the GPU)",
    )
    p.add_argument("--config", default=None, help="JSON file with settings overriding the defaults")
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        type=_ray_address,
        help="build on Ray Data: 'local' (the default when no ADDRESS) starts a local Ray instance, an address "
        "('auto', 'ray://HOST:10001') joins a cluster; this process stays the store's only writer",
    )
    p.add_argument(
        "--ray-workers",
        type=_positive,
        default=None,
        metavar="N",
        help="actors in the Ray pool (default: one per GPU of the cluster, else one per CPU)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")
    p.set_defaults(func=run)


def _ray_address(text: str) -> str:
    """'local', 'auto', HOST:PORT or ray://HOST:PORT (a file name here means --ray swallowed an input)."""
    if text in ("local", "auto") or (":" in text and not text.endswith(".json")):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not 'local', 'auto', HOST:PORT or ray://HOST:PORT "
        "(write --ray after the inputs, or --ray local)"
    )


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return v


def load_config(path: str | None):
    """The defaults, overridden by ``--config`` (``config.resolve_config``)."""
    from ..config import resolve_config

    return resolve_config(None, path)


def run(args: argparse.Namespace) -> int:
    from ..construct.pipeline import build_store
    from ..embed import load_embedder
    from ..ops.devices import encoder_device

    if args.ray_workers is not None and args.ray is None:
        raise ValueError("--ray-workers needs --ray (it sizes the Ray actor pool)")
    if args.workers > 1 and (args.ray is not None or args.builder == "llm"):
        raise ValueError(
            "--workers builds LLM-free on this machine: not with --ray (use --ray-workers) or --builder llm"
        )
    cfg = load_config(args.config)
    if args.embedder:
        cfg.embed.model = args.embedder
    cfg.theme.split = cfg.theme.split and not args.no_split
    cfg.theme.merge = cfg.theme.merge and not args.no_merge
    if args.ray is not None:
        return _run_ray(args, cfg)
    llm = None
    if args.builder == "llm":
        from ..construct.llm_stages import LLMBuilder
        from ..llm import load_reader

        llm = LLMBuilder(
            load_reader(args.llm, **_llm_kwargs(args)), max_retries=args.llm_retries, segment=cfg.segment
        )
    report = build_store(
        args.inputs,
        args.out,
        config=cfg,
        # with workers the workers load it (this process would only hold it)
        embedder=None
        if args.workers > 1
        else load_embedder(cfg.embed.model, device=encoder_device(args.backend, cfg.embed.device)),
        limit=args.limit,
        shard_size=args.shard_size,
        progress=not args.no_progress,
        backend=args.backend,
        llm=llm,
        max_sessions=args.sessions,
        workers=args.workers,
    )
    if args.json:
        print(json.dumps(report.__dict__ | ({"llm_usage": llm.gen.usage.__dict__} if llm else {}), indent=2))
        return 0
    _print_report(report, args.out)
    if llm:
        u = llm.gen.usage
        _print_usage(llm.gen.name, u.calls, u.prompt_tokens, u.output_tokens)
    return 0


def _llm_kwargs(args: argparse.Namespace) -> dict:
    return {"batch_size": args.llm_batch_size} if args.llm == "smollm2" or args.llm.startswith("hf:") else {}


def _print_report(report, out: str) -> None:
    print(
        f"built {len(report.built)} memories, skipped {len(report.skipped)} already in {out}, {report.wall_s:.1f} s"
    )
    for stage, sec in report.timings.items():
        print(f"  {stage:16s} {sec:8.2f} s")


def _print_usage(name: str, calls: int, prompt: int, output: int) -> None:
    print(
        f"LLM {name}: {calls} prompts, {prompt} prompt + {output} output tokens (per stage and memory: `xmemory stats STORE`)"
    )


def _run_ray(args: argparse.Namespace, cfg) -> int:
    """``--ray``: the same build on Ray Data (Ray is imported here, and only here)."""
    from ..distributed.ray_build import build_store_ray
    from ..embed import load_embedder

    report = build_store_ray(
        args.inputs,
        args.out,
        address=args.ray,
        config=cfg,
        embedder=load_embedder(cfg.embed.model),
        limit=args.limit,
        shard_size=args.shard_size,
        progress=not args.no_progress,
        backend=args.backend,
        llm_spec=args.llm if args.builder == "llm" else None,
        llm_kwargs=_llm_kwargs(args),
        llm_retries=args.llm_retries,
        max_sessions=args.sessions,
        workers=args.ray_workers,
    )
    if args.json:
        print(json.dumps(report.__dict__, indent=2))
        return 0
    _print_report(report, args.out)
    print(
        f"  ray: {report.workers} actors ({report.gpus_per_worker:g} GPU each), {report.shards} shards, "
        f"{report.repeats_dropped} repeated results of retried shards dropped; construction stages are summed over actors"
    )
    if report.llm_usage:
        u = report.llm_usage
        _print_usage(args.llm, u["calls"], u["prompt_tokens"], u["output_tokens"])
    return 0
