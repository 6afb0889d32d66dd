"""A self-contained HTML report of an inspection summary: the terminal figures, plots as
base64 PNG images, and the whole summary as JSON. One file, no server, no network.

Plots need matplotlib, an optional dependency (`pip install 'clozeworks[report]'`);
`write_html` raises UsageError saying so when it is missing.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import uuid
from pathlib import Path
from typing import Any

from clozeworks.corpus.inspect.text import render
from clozeworks.schemas.errors import UsageError

MISSING_MATPLOTLIB = (
    "--html needs matplotlib, which is not installed; "
    "install it with: pip install 'clozeworks[report]'"
)


def require_matplotlib() -> Any:
    """matplotlib's pyplot on the Agg backend; UsageError saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(MISSING_MATPLOTLIB) from None
    matplotlib.use("Agg")  # no display: render to memory only
    import matplotlib.pyplot as plt

    return plt


def write_html(summary: dict[str, Any], path: Path) -> Path:
    """Write the report atomically (temporary name, then rename) and return its path."""
    document = render_html(summary)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(document, encoding="utf-8")
    os.replace(tmp, path)
    return path


def render_html(summary: dict[str, Any]) -> str:
    plt = require_matplotlib()
    figures = {
        "shards": _shard_figures,
        "docs": _docs_figures,
        "run": _run_figures,
        "tokenizer": _no_figures,
    }[summary["kind"]](plt, summary)
    title = f"cloze inspect: {summary['kind']} {summary['path']}"
    images = "\n".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for caption, data in figures
    )
    problems = summary.get("problems") or []
    status = (
        f'<p class="bad">{len(problems)} problem(s) found</p>'
        if problems
        else '<p class="ok">no problems found</p>'
    )
    raw = json.dumps(summary, indent=2, default=str)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 0.85em; }}
figure {{ display: inline-block; margin: 0.5em; }} img {{ max-width: 34em; }}
.bad {{ color: #b00020; font-weight: bold; }} .ok {{ color: #1b5e20; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{status}
<h2>Summary</h2>
<pre>{html.escape(render(summary))}</pre>
<h2>Plots</h2>
{images or "<p>No plots for this kind of output.</p>"}
<details><summary>Everything, as JSON (the same as <code>--json</code>)</summary>
<pre>{html.escape(raw)}</pre></details>
</body></html>
"""


def _no_figures(plt: Any, s: dict[str, Any]) -> list[tuple[str, str]]:
    return []


def _png(plt: Any, fig: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _bar_hist(plt: Any, pairs: list[list[int]], title: str, xlabel: str) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if pairs:
        values, counts = zip(*pairs, strict=True)
        ax.bar(values, counts, width=1.0, color="#3465a4")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("sequences")
    return _png(plt, fig)


def _shard_figures(plt: Any, s: dict[str, Any]) -> list[tuple[str, str]]:
    out = [
        (
            "Sequence length histogram",
            _bar_hist(plt, s["sequence_length"]["histogram"], "Sequence lengths", "tokens"),
        )
    ]
    points = s["token_stats"]["rank_frequency"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if points:
        ranks, counts = zip(*points, strict=True)
        ax.loglog(ranks, counts, marker=".", linestyle="-", color="#cc0000")
    ax.set_title("Token rank-frequency")
    ax.set_xlabel("rank")
    ax.set_ylabel("occurrences")
    out.append(("Token rank-frequency (log-log)", _png(plt, fig)))
    if s.get("pairs"):
        pairs = s["pairs"]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, color in (("segment_a", "#3465a4"), ("segment_b", "#f57900")):
            hist = pairs[name]["histogram"]
            if hist:
                values, counts = zip(*hist, strict=True)
                ax.step(values, counts, where="mid", label=name.replace("_", " "), color=color)
        ax.set_title("Segment lengths (without [CLS]/[SEP])")
        ax.set_xlabel("tokens")
        ax.set_ylabel("sequences")
        ax.legend()
        out.append(("Segment A/B lengths", _png(plt, fig)))
        fig, ax = plt.subplots(figsize=(4, 3.5))
        labels = pairs["labels"]
        ax.bar(list(labels), list(labels.values()), color="#73d216")
        ax.set_title("Sentence labels")
        out.append(("Label balance", _png(plt, fig)))
    if s.get("premasked"):
        hist = s["premasked"]["predictions_per_sequence"]["histogram"]
        out.append(
            (
                "Predictions per sequence",
                _bar_hist(plt, hist, "Predictions per sequence", "masked positions"),
            )
        )
    return out


def _docs_figures(plt: Any, s: dict[str, Any]) -> list[tuple[str, str]]:
    hist = s["characters"]["histogram"]
    edges, counts = hist["edges"], hist["counts"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if counts:
        labels = [f"<{edges[i + 1]}" for i in range(len(counts))]
        ax.bar(range(len(counts)), counts, color="#3465a4")
        step = max(1, len(labels) // 8)
        ax.set_xticks(range(0, len(labels), step), labels[::step], rotation=30)
    ax.set_title("Document lengths (characters, log2 bins)")
    ax.set_ylabel("documents")
    return [("Document length histogram", _png(plt, fig))]


def _run_figures(plt: Any, s: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for names, title in ((s["losses"], "Loss"), (s["accuracies"], "Accuracy")):
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name in names:
            points = [(x, y) for x, y in s["curves"][name] if y is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, label=name, marker="." if len(xs) < 50 else None)
        ax.set_title(f"{title} curves")
        ax.set_xlabel("step")
        ax.legend(fontsize="small")
        out.append((f"{title} curves", _png(plt, fig)))
    tokens = [(x, y) for x, y in s["curves"].get("tokens_per_s", []) if y is not None]
    if tokens:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        xs, ys = zip(*tokens, strict=True)
        ax.plot(xs, ys, color="#75507b")
        ax.set_title("Throughput (tokens/s)")
        ax.set_xlabel("step")
        out.append(("Throughput", _png(plt, fig)))
    return out
