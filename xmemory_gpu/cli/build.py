"""``xmemory build INPUT... --out STORE [--ray [ADDRESS]]``: bulk-build memories, resumable, with per-stage timings
(on this machine, or on Ray Data with this process as the store's only writer).

Inputs are LoCoMo files or role chats (``datasets.role_chats``: an app's ``{"user_id", "messages":
[{"role", "content"}]}`` conversations, OpenAI's bare message lists, mem0's export), told apart per
file or named by ``--format``. A role chat's memory is the live engine's: keyed by its scope
(``engine.inputs.scope_key``), role ``user`` speaking as the memory's subject, with the engine's
unit ids, user name, message metadata and supersessions (``_engine_finish``), so
``MemoryEngine.open(STORE)`` searches it by ``user_id`` and adds to it and deletes from it."""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Callable
from typing import Any

from .args import text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a memory store from LoCoMo files or role chats (JSON / JSONL)")
    p.add_argument(
        "inputs", nargs="+", help="JSON / JSONL files or folders of them (LoCoMo, or role chats of user ids)"
    )
    p.add_argument("--out", required=True, help="store directory (created, or resumed if it exists)")
    p.add_argument(
        "--format",
        choices=["auto", "locomo", "chats"],
        default="auto",
        help="auto (default: told per file), locomo, or chats: {'user_id', 'agent_id'?, 'run_id'?, "
        "'messages': [{'role', 'content', 'created_at'?}]} per conversation, a bare message list, mem0's export",
    )
    p.add_argument("--user-id", type=text("user id"), default=None, help="the user of chats that name none")
    p.add_argument(
        "--agent-id", type=text("agent id"), default=None, help="the agent of chats that name none"
    )
    p.add_argument("--run-id", type=text("run id"), default=None, help="the run of chats that name none")
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


def _ray_address(value: str) -> str:
    """'local', 'auto', HOST:PORT or ray://HOST:PORT (a file name here means --ray swallowed an input)."""
    if value in ("local", "auto") or (":" in value and not value.endswith((".json", ".jsonl"))):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not 'local', 'auto', HOST:PORT or ray://HOST:PORT "
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
    loaded: dict = {}  # the build's embedder, which the statements' supersessions encode with

    def statements_encoder():
        if "embedder" not in loaded:  # --workers: this process loads one only if a statement needs it
            loaded["embedder"] = load_embedder(cfg.embed.model)
        return loaded["embedder"]

    inputs, finish, note = _inputs(args, cfg, statements_encoder)
    if args.ray is not None:
        loaded["embedder"] = load_embedder(cfg.embed.model)
        return _run_ray(args, cfg, inputs, finish, note, loaded["embedder"])
    llm = None
    if args.builder == "llm":
        from ..construct.llm_stages import LLMBuilder
        from ..llm import load_reader

        llm = LLMBuilder(
            load_reader(args.llm, **_llm_kwargs(args)), max_retries=args.llm_retries, segment=cfg.segment
        )
    if args.workers <= 1:  # with workers the workers load it (this process would only hold it)
        loaded["embedder"] = load_embedder(
            cfg.embed.model, device=encoder_device(args.backend, cfg.embed.device)
        )
    report = build_store(
        inputs,
        args.out,
        config=cfg,
        embedder=loaded.get("embedder") if args.workers <= 1 else None,
        limit=args.limit,
        shard_size=args.shard_size,
        progress=not args.no_progress,
        backend=args.backend,
        llm=llm,
        max_sessions=args.sessions,
        workers=args.workers,
        finish=finish,
    )
    if args.json:
        print(json.dumps(report.__dict__ | ({"llm_usage": llm.gen.usage.__dict__} if llm else {}), indent=2))
        return 0
    _print_report(report, args.out, note)
    if llm:
        u = llm.gen.usage
        _print_usage(llm.gen.name, u.calls, u.prompt_tokens, u.output_tokens)
    return 0


def _llm_kwargs(args: argparse.Namespace) -> dict:
    return {"batch_size": args.llm_batch_size} if args.llm == "smollm2" or args.llm.startswith("hf:") else {}


def _print_report(report, out: str, note: str = "") -> None:
    print(
        f"built {len(report.built)} memories, skipped {len(report.skipped)} already in {out}, {report.wall_s:.1f} s"
    )
    if note:
        print(f"  {note}")
    for stage, sec in report.timings.items():
        print(f"  {stage:16s} {sec:8.2f} s")


def _print_usage(name: str, calls: int, prompt: int, output: int) -> None:
    print(
        f"LLM {name}: {calls} prompts, {prompt} prompt + {output} output tokens (per stage and memory: `xmemory stats STORE`)"
    )


def _run_ray(args: argparse.Namespace, cfg, inputs, finish, note: str, embedder) -> int:
    """``--ray``: the same build on Ray Data (Ray is imported here, and only here)."""
    from ..distributed.ray_build import build_store_ray

    report = build_store_ray(
        inputs,
        args.out,
        address=args.ray,
        config=cfg,
        embedder=embedder,
        limit=args.limit,
        shard_size=args.shard_size,
        progress=not args.no_progress,
        backend=args.backend,
        llm_spec=args.llm if args.builder == "llm" else None,
        llm_kwargs=_llm_kwargs(args),
        llm_retries=args.llm_retries,
        max_sessions=args.sessions,
        workers=args.ray_workers,
        finish=finish,
    )
    if args.json:
        print(json.dumps(report.__dict__, indent=2))
        return 0
    _print_report(report, args.out, note)
    print(
        f"  ray: {report.workers} actors ({report.gpus_per_worker:g} GPU each), {report.shards} shards, "
        f"{report.repeats_dropped} repeated results of retried shards dropped; construction stages are summed over actors"
    )
    if report.llm_usage:
        u = report.llm_usage
        _print_usage(args.llm, u["calls"], u["prompt_tokens"], u["output_tokens"])
    return 0


# -- role chats ---------------------------------------------------------------------------------------
_IDS = uuid.UUID("6f1c2a52-4b1e-4f7a-9a53-0c8e2d7b9e11")  # namespace of the message ids a build gives


def _inputs(
    args: argparse.Namespace, cfg, encoder: Callable[[], Any] | None = None
) -> tuple[list, object, str]:
    """What ``build_store`` builds: the input paths (LoCoMo, read there as before), or the role
    chats read here as conversations with the engine's ``finish`` (``encoder()``: the build's
    embedder, for ``_engine_finish``); and a line for the report."""
    from ..datasets.role_chats import Scope, chat_files, chats_of, detect_format, read_json_or_lines

    scope = Scope(args.user_id, args.agent_id, args.run_id)
    if args.format == "locomo":
        return _locomo(args, scope)
    files = [f for p in args.inputs for f in chat_files(p)]
    parsed = [(f, *read_json_or_lines(f)) for f in files]
    kinds = {f: "chats" if args.format == "chats" or lines else detect_format(d) for f, d, lines in parsed}
    if set(kinds.values()) == {"locomo"}:
        return _locomo(args, scope)
    if "locomo" in kinds.values():
        loc = next(f for f, k in kinds.items() if k == "locomo")
        chat = next(f for f, k in kinds.items() if k == "chats")
        raise ValueError(
            f"{loc} holds LoCoMo conversations and {chat} role chats: build them into separate stores "
            "(or name one format with --format)"
        )
    chats = [c for f, d, lines in parsed for c in chats_of(f, d, lines, scope)]
    convs, extras, skipped = role_chat_conversations(chats)
    note = f"role chats: {len(chats)} conversations of {len(convs)} scopes" + (
        f", {skipped} system / tool / empty turns left out" if skipped else ""
    )
    finish = _engine_finish(
        extras, cfg.knn.k_semantics, cfg.semantic.read_replies_with_questions, encoder=encoder
    )
    return convs, finish, note


def _locomo(args: argparse.Namespace, scope) -> tuple[list, None, str]:
    """LoCoMo inputs: read by ``build_store`` (their speakers are named: no scope flag applies)."""
    if any((scope.user_id, scope.agent_id, scope.run_id)):
        raise ValueError("--user-id, --agent-id and --run-id apply to role chats; these inputs are LoCoMo")
    return list(args.inputs), None, ""


def role_chat_conversations(chats: list) -> tuple[list, dict[str, tuple[dict, tuple]], int]:
    """Role chats as the conversations a build reads, one per scope (``scope_key``; a scope's chats
    in order, each a session), their messages as the engine's ``add`` reads them (role ``user`` is
    the memory's subject, a ``name`` speaks as itself; an id given is the engine's message id,
    else one derived from the scope and position); per memory id, what ``_engine_finish`` keeps
    beside it: (message id -> metadata, the user name's stats); and the turns left out."""
    from ..datasets.locomo import DatasetError
    from ..datasets.role_chats import check_unique_ids
    from ..engine import inputs, people
    from ..engine import metadata as meta
    from ..engine.writes import name_after
    from ..memory.records import Conversation, Message

    check_unique_ids(chats)
    scopes: dict[str, list] = {}
    for c in chats:
        try:
            key = inputs.scope_key(c.user_id, c.agent_id, c.run_id)
        except ValueError as exc:
            raise DatasetError(f"{c.where}.{exc}") from None
        scopes.setdefault(key, []).append(c)
    convs, extras, skipped = [], {}, 0
    for key, group in scopes.items():
        msgs: list[Message] = []
        md: dict[str, dict] = {}
        given, claim = None, None
        taken = {m.id for c in group for m in c.messages if m.id is not None}
        for session, c in enumerate(group):
            skipped += c.skipped
            given = c.user_name or given
            for m in c.messages:
                try:
                    if m.id is not None:
                        mid = inputs.message_id(m.id, m.where)
                    else:
                        mid = uuid.uuid5(_IDS, f"{key}\n{len(msgs)}").hex
                        if mid in taken:
                            raise ValueError(f"{m.where}: id: a given id {mid!r} collides with a derived one")
                    if m.name is not None:
                        speaker = inputs.check_id(m.name, f"{m.where}.name")
                    elif m.role == "user":  # the memory's subject, as the engine's add reads role "user"
                        speaker = people.NEUTRAL
                        found = people.name_claim(m.content)
                        if found is not None and people.replaces(found, claim and claim[0]):
                            claim = (found, mid)
                    else:
                        speaker = people.ROLE_ALIASES[m.role]
                    both = {**(c.metadata or {}), **(m.metadata or {})}
                    if both:
                        md[mid] = meta.metadata(both, f"{m.where}.metadata")
                except ValueError as exc:
                    raise DatasetError(str(exc)) from None
                msgs.append(Message(mid, speaker, m.content, session, m.timestamp))
        if not msgs:
            continue
        pair = (tuple(dict.fromkeys(m.speaker for m in msgs)) + ("", ""))[:2]
        convs.append(Conversation(key, pair, msgs, [], group[0].where))
        extras[key] = (md, name_after(None, given, claim))
    return convs, extras, skipped


def _engine_finish(
    extras: dict[str, tuple[dict, tuple]],
    k: int,
    replies_read_with_questions: bool = False,
    encoder: Callable[[], Any] | None = None,
):
    """``build_store``'s ``finish`` for role chats: each memory given what the engine keeps with a
    memory it writes (``engine.writes``): the engine state (nothing open, the first two speakers),
    stable unit ids and their counters (``engine.ids.assign``), message metadata, the user's name
    and the supersessions between its statements (``carry_over``; ``encoder()``: the embedder of the
    statements, asked for when a long change statement needs it), as an ``add`` of its messages to an
    empty memory would."""
    from ..construct.incremental import empty_memory
    from ..engine import ids as unit_ids
    from ..engine.writes import carry_over
    from ..memory.engine_state import EngineState

    def encode(texts: list[str]):
        return encoder().encode(texts)

    def finish(slices: list) -> None:
        for sl in slices:
            md, name = extras[sl.memory_id]
            speakers = tuple(dict.fromkeys(sl.cols["msg"]["speaker"].tolist()))[:2]
            sl.engine = EngineState(open_from=sl.n("msg"), speakers=speakers)
            empty = empty_memory(sl.memory_id, sl.cols["msg"]["x"].shape[1], k)
            unit_ids.assign(empty, sl, set())
            carry_over(
                empty,
                sl,
                set(),
                md,
                name,
                [],
                replies_read_with_questions=replies_read_with_questions,
                encode=encode if encoder else None,
            )

    return finish
