"""The report's plots: matplotlib figures, full page width, as base64 PNG.

Scales follow the data: a count axis goes logarithmic when its values span more than
two decades (a length histogram's spike at the maximum would otherwise flatten
everything else), and a run's curves mark the steps a resume continued from.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from clozeworks.schemas.errors import UsageError

MISSING_MATPLOTLIB = (
    "--html needs matplotlib, which is not installed; "
    "install it with: pip install 'clozeworks[report]'"
)
WIDE = (11.0, 3.4)
COLORS = ("#3465a4", "#f57900", "#4e9a06", "#cc0000", "#75507b", "#c4a000", "#555753")
# A count axis is logarithmic when max / min (of the non-zero counts) exceeds this.
LOG_SPAN = 100.0


def require_matplotlib() -> Any:
    """matplotlib's pyplot on the Agg backend; UsageError saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(MISSING_MATPLOTLIB) from None
    matplotlib.use("Agg")  # no display: render to memory only
    import matplotlib.pyplot as plt

    return plt


def spans_decades(values: Sequence[float]) -> bool:
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > LOG_SPAN


def _count_axis(ax: Any, values: Sequence[float], label: str) -> str:
    """Make the y axis logarithmic when `values` span decades; the label to give it."""
    if not spans_decades(values):
        return label
    ax.set_yscale("log")
    return f"{label} (log scale)"


def png(plt: Any, fig: Any) -> str:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def bars(plt: Any, pairs: list[list[int]], title: str, xlabel: str, ylabel: str) -> str:
    """A histogram from (value, count) pairs."""
    fig, ax = plt.subplots(figsize=WIDE)
    if pairs:
        values, counts = zip(*pairs, strict=True)
        ax.bar(values, counts, width=1.0, color=COLORS[0])
        ylabel = _count_axis(ax, counts, ylabel)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return png(plt, fig)


def binned(plt: Any, edges: list[int], counts: list[int], title: str, ylabel: str) -> str:
    """A histogram over bins [edges[i], edges[i+1]), labelled by their upper edge."""
    fig, ax = plt.subplots(figsize=WIDE)
    used = [i for i, c in enumerate(counts) if c]
    if used:  # the bins from the first to the last that holds anything
        lo, hi = used[0], used[-1] + 1
        counts, edges = counts[lo:hi], edges[lo : hi + 1]
        ax.bar(range(len(counts)), counts, color=COLORS[0])
        labels = [f"<{edges[i + 1]:,}" for i in range(len(counts))]
        ax.set_xticks(range(len(counts)), labels, rotation=30)
        ylabel = _count_axis(ax, counts, ylabel)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return png(plt, fig)


def steps(
    plt: Any, series: dict[str, list[list[float]]], title: str, ylabel: str, ax_marks: list[int]
) -> str:
    """One curve per name against the step; dashed lines where a resume continued."""
    fig, ax = plt.subplots(figsize=WIDE)
    every: list[float] = []
    for i, (name, points) in enumerate(sorted(series.items())):
        xs = [p[0] for p in points if p[1] is not None]
        ys = [p[1] for p in points if p[1] is not None]
        every += ys
        marker = "." if len(xs) < 50 else None
        ax.plot(xs, ys, label=name, marker=marker, color=COLORS[i % len(COLORS)])
    for j, step in enumerate(ax_marks):
        ax.axvline(step, color="#888a85", linestyle="--", label="resumed" if j == 0 else None)
    ylabel = _count_axis(ax, every, ylabel)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if series or ax_marks:
        ax.legend(fontsize="small")
    return png(plt, fig)


def rank_frequency(plt: Any, points: list[list[int]]) -> str:
    fig, ax = plt.subplots(figsize=WIDE)
    if points:
        ranks, counts = zip(*points, strict=True)
        ax.loglog(ranks, counts, marker=".", linestyle="-", color=COLORS[3])
    ax.set_title("Token rank-frequency (log-log): a straight line is Zipf's law")
    ax.set_xlabel("rank")
    ax.set_ylabel("occurrences")
    ax.grid(alpha=0.3, which="both")
    return png(plt, fig)


def segments(plt: Any, pairs: dict[str, Any]) -> str:
    fig, ax = plt.subplots(figsize=WIDE)
    every: list[int] = []
    for name, color in (("segment_a", COLORS[0]), ("segment_b", COLORS[1])):
        hist = pairs[name]["histogram"]
        if hist:
            values, counts = zip(*hist, strict=True)
            every += counts
            ax.step(values, counts, where="mid", label=name.replace("_", " "), color=color)
    ylabel = _count_axis(ax, every, "sequences")
    ax.set_title("Segment lengths (without [CLS]/[SEP])")
    ax.set_xlabel("tokens")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    return png(plt, fig)
