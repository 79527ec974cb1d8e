"""What an evaluation writes besides the per-question rows: the run's provenance (config, package
versions, seed, git commit), the markdown tables and the PNG plots."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np

# the paper's names for the retrieval ablation rows (Table: Naive RAG / Memory-only / +RepSel / +UncSion / Full)
ABLATION_LABELS = {
    "naive-rag": "Naive RAG",
    "memory-only": "Memory-only",
    "xmemory-stage1": "+RepSel",
    "xmemory-stage2": "+UncSion",
    "xmemory": "Full",
}
_PACKAGES = ("xmemory-gpu", "numpy", "torch", "sentence-transformers", "transformers", "triton", "faiss-cpu")


def git_commit() -> str | None:
    """The commit of the source tree this package runs from (with ``-dirty`` when modified), or None."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


RETRIEVAL_DEFINITIONS: dict[str, str] = {
    "recall": "evidence recall: share of the question's distinct gold dia_ids among the context's message ids",
    "evidence_word_recall": "evidence-word recall: per gold message, the share of its words the context shows (a "
    "fragment its share, words shown twice once; a statement or LLM episode credits its sources "
    "with its own words split evenly, capped at 1), averaged over the gold messages",
    "precision": "evidence precision: share of the context's distinct message ids that are gold evidence",
    "context_tokens": "tokens of the assembled context (the run's tokenizer, named in the summary)",
    "covered": "1 when every content word of the answer (SQuAD-normalised tokens minus stopwords) is in the "
    "context, else 0 (questions whose answer has no content word are left out)",
    "covered_share": "share of the answer's content words found in the context",
    "blocks_to_cover": "length of the shortest prefix of the ranked blocks holding every answer word (None if never)",
    "tokens_to_cover": "tokens of that prefix",
    "density_0": "share of blocks holding no answer word",
    "density_1": "share of blocks holding exactly 1 answer word",
    "density_2": "share of blocks holding exactly 2 answer words",
    "density_3+": "share of blocks holding 3 or more answer words",
    "llm_calls": "reader / generator calls per question made by retrieval",
    "llm_tokens": "reader / generator tokens per question spent by retrieval",
    "queries_per_second": "questions retrieved per second (batched)",
}


def metric_definitions() -> dict[str, str]:
    """Every metric a summary reports, with its definition (retrieval, then QA)."""
    from .metrics import METRIC_DEFINITIONS

    return {**RETRIEVAL_DEFINITIONS, **METRIC_DEFINITIONS}


def provenance(seed: int) -> dict:
    """The run's provenance for ``summary.json``, with every metric's definition."""
    return {
        "git_commit": git_commit(),
        "versions": versions(),
        "seed": seed,
        "command": " ".join(sys.argv),
        "platform": platform.platform(),
        "metric_definitions": metric_definitions(),
    }


def fmt(v, digits=3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


QA_KEYS = [
    "f1_authors",
    "f1_squad",
    "exact_match",
    "bleu1",
    "bleu1_authors",
    "rouge_l",
    "locomo_f1",
    "tokens_per_query",
]


def summary_markdown(summary: dict[str, dict], meta: dict, labels: dict[str, str] | None = None) -> str:
    """The tables: retrieval metrics micro-averaged over categories 1-4, QA metrics when a reader
    ran, evidence recall by category, and the run's provenance."""
    labels = labels or {}
    name = lambda s: labels.get(s, s)  # noqa: E731
    cats = ", ".join(str(c) for c in meta["categories"])
    lines = [
        f"# LoCoMo evaluation: {meta['questions']} questions (categories {cats})",
        "",
        f"Micro-averaged over the questions; tokens in {meta['tokenizer']}; embedder {meta['embedder']}; "
        f"budget {meta['budget_tokens'] or 'none'}; reader {meta['reader'] or 'none'}.",
        "",
        "| strategy | evidence recall | evidence-word recall | precision | context tokens | answer covered | "
        "blocks to cover | tokens to cover | density 1 / 2 / 3+ | LLM calls | q/s |",
        "|" + "---|" * 11,
    ]
    for s, v in summary.items():
        m = {k: (x["micro"] if isinstance(x, dict) and "micro" in x else x) for k, x in v.items()}
        dens = " / ".join(fmt(m[f"density_{k}"], 2) for k in ("1", "2", "3+"))
        lines.append(
            f"| {name(s)} | {fmt(m['recall'])} | {fmt(m.get('evidence_word_recall'))} | {fmt(m['precision'])} | {fmt(m['context_tokens'], 0)} | "
            f"{fmt(m['covered'])} | {fmt(m['blocks_to_cover'], 1)} | {fmt(m['tokens_to_cover'], 0)} | {dens} | "
            f"{fmt(m['llm_calls'], 1)} | {fmt(m['queries_per_second'], 1)} |"
        )
    if any("f1_authors" in v for v in summary.values()):
        lines += [
            "",
            f"QA with the reader {meta['reader']}:",
            "",
            "| strategy | F1 (authors) | F1 (SQuAD) | EM | BLEU-1 | BLEU-1 (authors, NLTK) | ROUGE-L | F1 (LoCoMo) | "
            "tokens per query |",
            "|" + "---|" * 9,
        ]
        for s, v in summary.items():
            lines.append(
                f"| {name(s)} | "
                + " | ".join(
                    fmt(v[k]["micro"] if k in v else None, 0 if k == "tokens_per_query" else 3)
                    for k in QA_KEYS
                )
                + " |"
            )
    all_cats = sorted({c for v in summary.values() for c in v["recall"] if c != "micro"}, key=int)
    lines += [
        "",
        "Evidence recall by category:",
        "",
        "| strategy | " + " | ".join(f"cat {c}" for c in all_cats) + " |",
        "|" + "---|" * (len(all_cats) + 1),
    ]
    for s, v in summary.items():
        lines.append(f"| {name(s)} | " + " | ".join(fmt(v["recall"].get(c)) for c in all_cats) + " |")
    notes = sorted({n for v in summary.values() for n in v.get("notes", [])})
    if notes:
        lines += ["", "Notes:", *[f"- {n}" for n in notes]]
    prov = meta.get("provenance", {})
    lines += ["", f"Commit {prov.get('git_commit')}, seed {prov.get('seed')}, `{prov.get('command')}`."]
    return "\n".join(lines) + "\n"


def sweep_markdown(sweep: dict, labels: dict[str, str] | None = None) -> str:
    """One row per strategy: evidence recall, evidence-word recall, answer words covered and mean
    context tokens at each budget."""
    labels = labels or {}
    budgets = sweep["budgets"]
    lines = [
        "| strategy | "
        + " | ".join(f"recall@{b} | word recall@{b} | covered@{b} | tokens@{b}" for b in budgets)
        + " |",
        "|" + "---|" * (4 * len(budgets) + 1),
    ]
    for s, r in sweep["strategies"].items():
        words = r.get("evidence_word_recall", [None] * len(budgets))
        cells = [
            f"{fmt(a)} | {fmt(w)} | {fmt(c)} | {fmt(t, 0)}"
            for a, w, c, t in zip(r["recall"], words, r["covered"], r["context_tokens"])
        ]
        lines.append(f"| {labels.get(s, s)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_recall_vs_tokens(
    summary: dict[str, dict], sweep: dict | None, path: Path, labels: dict[str, str] | None = None
) -> None:
    """Evidence recall and evidence-word recall against mean context tokens: one point per strategy
    at the run's budget, and the budget sweep's curve when one was run."""
    plt = _pyplot()
    labels = labels or {}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, title in zip(
        axes, ("recall", "evidence_word_recall"), ("evidence recall", "evidence-word recall")
    ):
        for i, (s, v) in enumerate(summary.items()):
            color = f"C{i % 10}"
            if sweep and s in sweep["strategies"] and key in sweep["strategies"][s]:
                r = sweep["strategies"][s]
                ax.plot(
                    r["context_tokens"],
                    [np.nan if y is None else y for y in r[key]],
                    marker="o",
                    color=color,
                    alpha=0.8,
                )
            y = v.get(key, {}).get("micro")
            ax.scatter(
                [v["context_tokens"]["micro"]],
                [np.nan if y is None else y],
                s=80,
                marker="*",
                color=color,
                label=labels.get(s, s),
                zorder=3,
            )
        ax.set_xlabel("mean context tokens")
        ax.set_ylabel(f"{title} (micro)")
        ax.set_title(f"{title.capitalize()} vs context tokens" + (" (lines: budget sweep)" if sweep else ""))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_categories(
    summary: dict[str, dict], path: Path, labels: dict[str, str] | None = None, key: str = "recall"
) -> None:
    """Grouped bars: ``key`` per LoCoMo category, one bar per strategy."""
    plt = _pyplot()
    labels = labels or {}
    cats = sorted({c for v in summary.values() for c in v[key] if c != "micro"}, key=int)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    width = 0.8 / max(1, len(summary))
    for i, (s, v) in enumerate(summary.items()):
        xs = [j + (i - (len(summary) - 1) / 2) * width for j in range(len(cats))]
        ax.bar(xs, [v[key].get(c) or 0.0 for c in cats], width, label=labels.get(s, s))
    ax.set_xticks(range(len(cats)), [f"category {c}" for c in cats])
    ax.set_ylabel(f"{key} (mean)")
    ax.set_ylim(0, 1)
    ax.set_title(f"{key.capitalize()} by LoCoMo category")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_density(summary: dict[str, dict], path: Path, labels: dict[str, str] | None = None) -> None:
    """Stacked bars per strategy: the share of retrieved blocks holding 0, 1, 2, 3+ distinct answer words."""
    plt = _pyplot()
    labels = labels or {}
    names = list(summary)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bottom = [0.0] * len(names)
    for k, color in zip(("0", "1", "2", "3+"), ("#cccccc", "#9ecae1", "#4292c6", "#08519c")):
        vals = [summary[s][f"density_{k}"]["micro"] or 0.0 for s in names]
        ax.bar(
            [labels.get(s, s) for s in names],
            vals,
            bottom=bottom,
            color=color,
            label=f"{k} answer word{'' if k == '1' else 's'}",
        )
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("share of retrieved blocks")
    ax.set_ylim(0, 1)
    ax.set_title("Evidence density: answer words per retrieved block")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_sweep(sweep: dict, path: Path, labels: dict[str, str] | None = None) -> None:
    """Evidence recall, evidence-word recall and answer-word coverage against the token budget, per strategy."""
    plt = _pyplot()
    labels = labels or {}
    keys = ("recall", "evidence_word_recall", "covered")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for s, r in sweep["strategies"].items():
        for ax, key in zip(axes, keys):
            ys = r.get(key, [None] * len(sweep["budgets"]))
            ax.plot(
                sweep["budgets"], [np.nan if y is None else y for y in ys], marker="o", label=labels.get(s, s)
            )
    for ax, title in zip(axes, ("evidence recall", "evidence-word recall", "answer words covered")):
        ax.set_xlabel("context budget (tokens)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
