"""A store's summary: per memory counts, theme sizes, f(P), reassignment ratio and LLM-builder
work, with totals and means (``xmemory stats``, the construction ablation)."""

from __future__ import annotations

COLUMNS = [
    ("n_messages", "msgs"),
    ("n_episodes", "epis"),
    ("n_semantics", "sems"),
    ("n_themes", "themes"),
    ("mean_theme_size", "mean|T|"),
    ("max_theme_size", "max|T|"),
    ("f_P", "f(P)"),
    ("reassignment_ratio", "reassign"),
]


def collect(store) -> dict:
    """The summary of an open ``Store`` (see the module docstring); JSON-ready."""
    per = {}
    for mid in store.memory_ids():
        s = store.stats(mid)
        per[mid] = {k: s.get(k) for k, _ in COLUMNS} | {
            k: s[k]
            for k in ("n_splits", "n_merges", "split", "merge", "builder", "llm_tokens", "llm")
            if k in s
        }
    n = len(per)
    totals = {
        k: sum(p[k] or 0 for p in per.values())
        for k in ("n_messages", "n_episodes", "n_semantics", "n_themes")
    }
    means = {
        f"mean_{k}": (sum(p[k] or 0 for p in per.values()) / n if n else 0.0)
        for k in ("f_P", "reassignment_ratio", "mean_theme_size")
    }
    totals["max_theme_size"] = max((p["max_theme_size"] or 0 for p in per.values()), default=0)
    return {
        "store": str(store.path),
        "embedder": store.embedder,
        "dim": store.dim,
        "memories": per,
        "totals": totals | means,
    }
