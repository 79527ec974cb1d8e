"""The live engine's write path on a grown memory: a one-message add, an update and a delete of one
message, the add that teaches the user's name, and how long another user's one-message add waits
behind a large batch. Real chat text: the first conversation of a LoCoMo-format file (speaker A as
role ``user``, speaker B as ``assistant``).

  python benchmarks/bench_write_path.py --data ../data/locomo_dev.json --messages 500 --reps 5

Prints one JSON object (seconds; p50 and max over ``--reps``); ``--out`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _record import cpu_name, write_record

from xmemory_gpu import MemoryEngine
from xmemory_gpu.datasets.locomo import load_locomo


def _turns(path: str, n: int) -> list[dict]:
    convs = load_locomo(path)
    out: list[dict] = []
    for conv in convs:
        a = conv.speakers[0]
        out += [{"role": "user" if m.speaker == a else "assistant", "content": m.text} for m in conv.messages]
        if len(out) >= n:
            break
    return out[:n]


def _summary(xs: list[float]) -> dict:
    return {"p50": round(statistics.median(xs), 4), "max": round(max(xs), 4), "n": len(xs)}


def _grown(root: Path, embedder: str, user: str, turns: list[dict]) -> tuple[MemoryEngine, list[str]]:
    """An engine whose memory ``user`` holds ``turns`` (added 50 at a time), and their ids."""
    eng = MemoryEngine.open(root, embedder=embedder)
    ids: list[str] = []
    for i in range(0, len(turns), 50):
        ids += eng.add(turns[i : i + 50], user_id=user)
    return eng, ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a LoCoMo-format JSON file")
    ap.add_argument("--messages", type=int, default=500)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--embedder", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--batch-items",
        type=int,
        default=10,
        help="items of the large batch (one user each, the per-memory limit of messages each)",
    )
    ap.add_argument("--out")
    args = ap.parse_args()
    turns = _turns(args.data, args.messages + 4 * args.reps + 10)
    base, extra = turns[: args.messages], turns[args.messages :]
    res: dict = {"cpu": cpu_name(), "embedder": args.embedder, "messages": args.messages}
    with tempfile.TemporaryDirectory() as tmp:
        eng, base_ids = _grown(Path(tmp) / "s", args.embedder, "u", base)
        try:
            adds, updates, deletes = [], [], []
            for r in range(args.reps):
                t = time.perf_counter()
                eng.add([extra[r]], user_id="u")
                adds.append(time.perf_counter() - t)
            # messages spread over the memory (closed episodes, several statements), not the ones just added
            spread = [base_ids[(k + 1) * len(base_ids) // (2 * args.reps + 1)] for k in range(2 * args.reps)]
            for r, mid in enumerate(spread[: args.reps]):
                t = time.perf_counter()
                eng.update(mid, extra[args.reps + r]["content"] + " (edited)", user_id="u")
                updates.append(time.perf_counter() - t)
            for mid in spread[args.reps :]:
                t = time.perf_counter()
                eng.delete(mid, user_id="u")
                deletes.append(time.perf_counter() - t)
            res["add_1"] = _summary(adds)
            res["update_1"] = _summary(updates)
            res["delete_1"] = _summary(deletes)
            res["update_over_add"] = round(res["update_1"]["p50"] / res["add_1"]["p50"], 2)
            res["delete_over_add"] = round(res["delete_1"]["p50"] / res["add_1"]["p50"], 2)

            # the add that teaches the user's name, against a plain add of as many messages
            named, plain = [], []
            for r in range(args.reps):
                for label, text, out in (
                    ("n", "Hi, I'm Priya, by the way.", named),
                    ("p", "Hi, it is a lovely day, by the way.", plain),
                ):
                    user = f"{label}{r}"
                    for i in range(0, len(base), 50):
                        eng.add(base[i : i + 50], user_id=user)
                    t = time.perf_counter()
                    eng.add([{"role": "user", "content": text}], user_id=user)
                    out.append(time.perf_counter() - t)
            res["name_add"] = _summary(named)
            res["plain_add"] = _summary(plain)
            res["name_over_plain"] = round(res["name_add"]["p50"] / res["plain_add"]["p50"], 2)

            # another user's one-message add while the largest batch the limits allow is written
            per_item = eng.limits.max_messages
            items = [
                {
                    "user_id": f"big{i}",
                    "messages": [
                        dict(extra[0], content=f"{turns[j % len(turns)]['content']} ({i})")
                        for j in range(per_item)
                    ],
                }
                for i in range(args.batch_items)
            ]
            waits: list[float] = []
            outcome: dict = {}

            def big() -> None:
                t = time.perf_counter()
                try:
                    eng.add_batch(items)
                    outcome["batch"] = "accepted"
                except ValueError as exc:
                    outcome["batch"] = f"refused: {exc}"
                outcome["batch_s"] = round(time.perf_counter() - t, 3)

            th = threading.Thread(target=big)
            th.start()
            time.sleep(0.5)
            t = time.perf_counter()
            eng.add([{"role": "user", "content": "I live in Oslo."}], user_id="other")
            waits.append(time.perf_counter() - t)
            th.join()
            res["other_add_behind_batch_s"] = round(waits[0], 3)
            res["batch"] = outcome
        finally:
            eng.close()
    print(json.dumps(res, indent=1))
    if args.out:
        write_record(args.out, res)


if __name__ == "__main__":
    main()
