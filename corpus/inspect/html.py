"""A self-contained HTML report of an inspection summary: tables of the figures, full-width
plots (`corpus.inspect.plots`, base64 PNG), and the whole summary as JSON. One file, no
script, no server, no network.

Plots need matplotlib, an optional dependency (`pip install 'clozeworks[report]'`);
`write_html` raises UsageError saying so when it is missing.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from clozeworks.corpus.inspect import plots
from clozeworks.corpus.inspect.plots import MISSING_MATPLOTLIB, require_matplotlib
from clozeworks.corpus.outputs import LOCAL
from clozeworks.schemas.errors import BadInputError

__all__ = ["MISSING_MATPLOTLIB", "render_html", "require_matplotlib", "write_html"]
MAX_ROWS = 50  # rows of a long table (per-shard figures) before "and N more"
# Where a masked position's token went: BERT's 80/10/10.
BERT_SPLIT = {"mask": 0.8, "random": 0.1, "unchanged": 0.1}

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1em 2em;
       max-width: 78em; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; word-break: break-all; } h2 { margin-top: 1.6em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.7em; text-align: left;
         vertical-align: top; }
th { background: #f3f4f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.cols { display: flex; flex-wrap: wrap; gap: 2em; } .cols > div { flex: 1 1 24em; }
figure { margin: 1em 0; } figure img { width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
.bar { background: #3465a4; height: 0.8em; display: inline-block; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #1b5e20; } .warn { color: #8a5a00; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em;
      white-space: pre-wrap; }
"""


def write_html(summary: dict[str, Any], path: Path) -> Path:
    """Write the report atomically (temporary name, then rename) and return its path."""
    document = render_html(summary)
    if path.is_dir():
        raise BadInputError(f"{path}: is a directory; give --html a file name")
    LOCAL.mkdirs(str(path.parent))
    LOCAL.write_atomic(str(path), document.encode("utf-8"))
    return path


def render_html(summary: dict[str, Any]) -> str:
    plt = require_matplotlib()
    body = {
        "shards": _shards,
        "docs": _docs,
        "run": _run,
        "tokenizer": _tokenizer,
    }[summary["kind"]](plt, summary)
    title = f"cloze inspect: {summary['kind']} {summary['path']}"
    raw = json.dumps(summary, indent=2, default=str)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title><style>{STYLE}</style></head><body>
<h1>{_e(title)}</h1>
{_status(summary)}
{body}
<h2>Everything, as JSON</h2>
<details><summary>The same as <code>cloze inspect --json</code></summary>
<pre>{_e(raw)}</pre></details>
</body></html>
"""


# --- building blocks ----------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "no")
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, list | dict):
        return json.dumps(value)
    return str(value)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.2f}%"


def _kv(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of name and value."""
    cells = "".join(f'<tr><th>{_e(k)}</th><td class="n">{_e(_fmt(v))}</td></tr>' for k, v in rows)
    return f"<table>{cells}</table>"


def _grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], numeric: set[int]) -> str:
    """A table; columns in `numeric` right-aligned and formatted; cells given as
    ("html", markup) are inserted as they are."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows[:MAX_ROWS]:
        cells = []
        for i, cell in enumerate(row):
            if isinstance(cell, tuple) and cell and cell[0] == "html":
                cells.append(f"<td>{cell[1]}</td>")
            elif i in numeric:
                cells.append(f'<td class="n">{_e(_fmt(cell))}</td>')
            else:
                cells.append(f"<td>{_e(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (
        f"<p>and {len(rows) - MAX_ROWS:,} more (see the JSON)</p>" if len(rows) > MAX_ROWS else ""
    )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _bar(share: float, scale: float = 1.0) -> tuple[str, str]:
    """A cell with `share` as a percentage and a bar of `share / scale` of full width."""
    width = max(0.0, min(1.0, share / scale if scale else 0.0)) * 12
    return ("html", f'<span class="bar" style="width:{width:.2f}em"></span> {_pct(share)}')


def _figure(data: str, caption: str) -> str:
    return (
        f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _status(summary: dict[str, Any]) -> str:
    problems = summary.get("problems") or []
    warnings = summary.get("warnings") or []
    out = [
        f'<p class="bad">{len(problems)} problem(s) found</p>'
        if problems
        else '<p class="ok">no problems found</p>'
    ]
    for item in problems:
        out.append(f'<p class="bad">{_e(_fmt(item))}</p>')
    for item in warnings:
        out.append(f'<p class="warn">warning: {_e(item)}</p>')
    return "\n".join(out)


# --- shard sets ---------------------------------------------------------------------------


def _shards(plt: Any, s: dict[str, Any]) -> str:
    tokens = s["token_stats"]
    lengths = s["sequence_length"]
    padding = s.get("padding") or {}
    overview = _kv(
        [
            ("mode", s["mode"]),
            ("max sequence length", s["max_seq_len"]),
            ("vocabulary", f"{s['vocab_kind']}, {s['vocab_size']:,} tokens"),
            ("shards / blocks", f"{s['shards']:,} / {s['blocks']:,}"),
            ("sequences", s["sequences"]),
            ("tokens", s["tokens"]),
            ("bytes (per token)", f"{s['bytes']:,} ({s['bytes_per_token']:.2f})"),
            ("pre-masked", _premask(s["premask"])),
            ("dupe factor", s["dupe_factor"]),
            ("verified (checksums)", s["verified"]),
        ]
    )
    quality = _kv(
        [
            (
                "length mean / p50 / p95",
                f"{lengths['mean']:.1f} / {lengths['p50']} / {lengths['p95']}",
            ),
            ("UNK rate", _pct(tokens["unk_rate"])),
            ("distinct tokens", tokens["distinct"]),
            ("vocabulary never used", _pct(tokens["never_used_share"])),
            (
                f"padding, batches of {padding.get('batch_size', '-')}: static",
                _pct(padding.get("static")),
            ),
            ("padding: to the batch's longest", _pct(padding.get("dynamic"))),
            ("padding: length-bucketed", _pct(padding.get("bucketed"))),
        ]
    )
    out = [f'<h2>Overview</h2><div class="cols"><div>{overview}</div><div>{quality}</div></div>']
    out.append("<h2>Sequence lengths</h2>")
    out.append(
        _figure(
            plots.bars(plt, lengths["histogram"], "Sequence lengths", "tokens", "sequences"),
            "Tokens per sequence, [CLS] and [SEP] included.",
        )
    )
    if s.get("pairs"):
        out.append(_pairs(plt, s["pairs"]))
    if s.get("premasked"):
        out.append(_premasked(plt, s["premasked"]))
    most = tokens["top"][0]["share"] if tokens["top"] else 1.0
    top = [(t["token"], t["id"], t["count"], _bar(t["share"], most)) for t in tokens["top"]]
    out.append("<h2>Tokens</h2>")
    out.append('<div class="cols"><div>')
    out.append(_grid(("token", "id", "count", "share of all tokens"), top, {1, 2}))
    special = [(name, count) for name, count in tokens["special"].items()]
    out.append(f"</div><div><h3>Special tokens</h3>{_grid(('token', 'count'), special, {1})}")
    out.append("</div></div>")
    out.append(_figure(plots.rank_frequency(plt, tokens["rank_frequency"]), "Rank-frequency."))
    rows = [
        (p["name"], p["sequences"], p["tokens"], p["blocks"], p["bytes"], p.get("state", "-"))
        for p in s["per_shard"]
    ]
    out.append("<h2>Shards</h2>")
    out.append(
        _grid(("shard", "sequences", "tokens", "blocks", "bytes", "state"), rows, {1, 2, 3, 4})
    )
    return "\n".join(out)


def _premask(settings: dict[str, Any] | None) -> str:
    if not settings:
        return "no (masked by the trainer)"
    rest = ", ".join(f"{k} {v}" for k, v in settings.items() if k != "kind" and v is not None)
    return f"{settings.get('kind')}: {rest}"


def _pairs(plt: Any, pairs: dict[str, Any]) -> str:
    labels = [
        (name, count, _bar(pairs["label_share"][name])) for name, count in pairs["labels"].items()
    ]
    table = _grid(("sentence label", "sequences", "share"), labels, {1})
    return f"<h2>Sentence pairs</h2>{table}" + _figure(
        plots.segments(plt, pairs), "Tokens in segment A and in segment B."
    )


def _premasked(plt: Any, m: dict[str, Any]) -> str:
    rows = [
        (what, m["counts"][what], _bar(m["split"][what]), _pct(BERT_SPLIT[what]))
        for what in ("mask", "random", "unchanged")
    ]
    split = _grid(("masked position becomes", "positions", "share", "BERT"), rows, {1})
    figures = _kv(
        [
            ("predictions", m["predictions"]),
            ("of the maskable tokens", _pct(m["masked_share"])),
        ]
    )
    hist = m["predictions_per_sequence"]["histogram"]
    plot = plots.bars(plt, hist, "Predictions per sequence", "masked positions", "sequences")
    return (
        f'<h2>Static masks</h2><div class="cols"><div>{split}</div><div>{figures}</div></div>'
        + _figure(plot, "Masked positions per sequence (the cap is --max-predictions).")
    )


# --- document stores ----------------------------------------------------------------------


def _docs(plt: Any, s: dict[str, Any]) -> str:
    chars = s["characters"]
    overview = _kv(
        [
            ("documents", s["documents"]),
            ("part files", s["files"]),
            ("text (UTF-8 bytes)", s["bytes"]),
            ("characters mean / p50 / p95 / max", _spread(chars)),
            ("complete (.stats.json present)", s["complete"]),
        ]
    )
    out = [f"<h2>Overview</h2>{overview}", "<h2>From input to this store</h2>", _funnel(s)]
    hist = chars["histogram"]
    out.append(
        _figure(
            plots.binned(plt, hist["edges"], hist["counts"], "Document lengths", "documents"),
            "Characters per document, in bins that double.",
        )
    )
    sources = s.get("sources") or {"distinct": 0, "top": []}
    total = max(s["documents"], 1)
    directories = sources.get("directories") or []
    out.append(f"<h2>Sources</h2><p>{sources['distinct']:,} files, by directory:</p>")
    by_directory = [
        (x["directory"], x["files"], x["documents"], _bar(x["documents"] / total))
        for x in directories
    ]
    out.append(_grid(("directory", "files", "documents", "share"), by_directory, {1, 2}))
    largest = [(x["source"], x["documents"], _bar(x["documents"] / total)) for x in sources["top"]]
    out.append("<p>The largest files:</p>")
    out.append(_grid(("source", "documents", "share"), largest, {1}))
    clusters = (s.get("duplicates") or {}).get("largest_clusters") or []
    if clusters:
        out.append("<h2>Largest duplicate clusters</h2>")
        out.append(
            _grid(
                ("kept document", "documents in the cluster"),
                [(c["id"], c["size"]) for c in clusters],
                {1},
            )
        )
    samples = s.get("samples") or []
    if samples:
        out.append("<h2>Sample documents</h2>")
        for doc in samples:
            head = f"<p><b>{_e(doc['id'])}</b> from {_e(doc['source'])}</p>"
            out.append(f"{head}<pre>{_e(doc['text'])}</pre>")
    return "\n".join(out)


def _spread(chars: dict[str, Any]) -> str:
    mean = f"{chars['mean']:,.0f}" if chars.get("mean") is not None else "-"
    return f"{mean} / {_fmt(chars['p50'])} / {_fmt(chars['p95'])} / {_fmt(chars['max'])}"


def _funnel(s: dict[str, Any]) -> str:
    """Each stage from the first: documents in, every drop reason, duplicates, out."""
    rows: list[tuple[Any, ...]] = []
    first = None
    for stage in reversed(s["stages"]):
        name = stage.get("stage") or "?"
        start = stage.get("documents_in") or 0
        first = first or start or 1
        rows.append((name, "documents in", start, _bar(start / first)))
        for reason, count in sorted(stage["dropped"].items(), key=lambda kv: -kv[1]):
            rows.append(("", f"dropped: {reason}", -count, _bar(count / first)))
        removed = stage["duplicates"].get("duplicates")
        if removed:
            rows.append(("", "duplicates removed", -removed, _bar(removed / first)))
        out = stage.get("documents_out") or 0
        rows.append(("", "documents out", out, _bar(out / first)))
    if not rows:
        return "<p>No .stats.json: the figures of the stages are unknown.</p>"
    return _grid(("stage", "", "documents", "of the first stage's input"), rows, {2})


# --- training runs ------------------------------------------------------------------------


def _run(plt: Any, s: dict[str, Any]) -> str:
    model = s["model"]
    last = s.get("last_checkpoint") or {}
    overview = _kv(
        [
            ("model", _model(model)),
            ("objectives", ", ".join(s.get("objectives") or [])),
            (
                "steps logged / last / max",
                f"{s['logged_steps']} / {s['last_step']:,} / {s['max_steps']:,}",
            ),
            ("batch size", s["batch_size"]),
            ("last checkpoint", last.get("name", "-")),
            ("resumed at", ", ".join(str(r) for r in s.get("resumes") or []) or "never"),
            ("tokens/s (mean)", s["throughput"]["tokens_per_s"]["mean"]),
        ]
    )
    out = [f"<h2>Overview</h2>{overview}", "<h2>Curves</h2>"]
    marks = list(s.get("resumes") or [])
    curves = s["curves"]
    held = {k: v for k, v in curves.items() if k.startswith("eval")}
    train = {k: v for k, v in curves.items() if k not in held}
    # Perplexity runs to thousands early on: a plot of its own, not the losses' scale.
    perplexity = {k: v for k, v in held.items() if k.endswith("perplexity")}
    held = {k: v for k, v in held.items() if k not in perplexity}
    losses = {k: v for k, v in train.items() if k.endswith("loss")}
    if len(losses) == 2 and "loss" in losses:
        # One objective: the total is that objective's loss, drawn twice.
        (single,) = (k for k in losses if k != "loss")
        if losses["loss"] == losses[single]:
            del losses["loss"]
    held_loss = {k: v for k, v in held.items() if k.endswith("loss")}
    held_accuracy = {k: v for k, v in held.items() if k.endswith("accuracy")}
    held_other = {k: v for k, v in held.items() if k not in held_loss and k not in held_accuracy}
    # Training and held-out loss of each objective on one axis: overfitting shows as a gap.
    overlaid = {}
    for name, series in losses.items():
        for held_name in (f"eval/{name}", f"eval_{name}"):  # a held-out record, or inline
            if held_name in held_loss:
                overlaid[f"train {name}"] = series
                overlaid[f"held-out {name}"] = held_loss[held_name]
    groups = [
        ("Training loss", "loss", losses),
        ("Training and held-out loss", "loss", overlaid),
        ("Held-out loss", "loss", held_loss),
        ("Held-out accuracy", "accuracy", held_accuracy),
        ("Held-out", "value", held_other),
        ("Held-out perplexity", "perplexity", perplexity),
        ("Accuracy", "accuracy", {k: v for k, v in train.items() if k.endswith("accuracy")}),
        ("Learning rate", "lr", {k: v for k, v in train.items() if k == "lr"}),
        (
            "Gradient norm (before clipping)",
            "norm",
            {k: v for k, v in train.items() if k == "grad_norm"},
        ),
        ("Throughput", "tokens/s", {k: v for k, v in train.items() if k == "tokens_per_s"}),
    ]
    for title, ylabel, series in groups:
        if series:
            caption = f"{title}: {', '.join(sorted(series))}"
            if marks:
                caption += "; dashed: resumed from a checkpoint"
            out.append(_figure(plots.steps(plt, series, title, ylabel, marks), caption))
    config = s.get("config") or {}
    out.append("<h2>Configuration</h2>")
    out.append(_grid(("setting", "value"), list(_flatten(config)), set()))
    return "\n".join(out)


def _model(model: dict[str, Any]) -> str:
    return (
        f"{model.get('family')}: {model.get('num_layers')} layers, hidden "
        f"{model.get('hidden_size')}, {model.get('num_heads')} heads"
    )


def _flatten(config: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", _fmt(value)


# --- tokenizers ---------------------------------------------------------------------------


def _tokenizer(plt: Any, s: dict[str, Any]) -> str:
    special = [(name, t["token"], t["id"]) for name, t in s["special_tokens"].items()]
    held = (s.get("vocab_stats") or {}).get("heldout") or {}
    pieces = s.get("pieces") or {}
    overview = _kv(
        [
            ("kind", s["vocab_kind"]),
            ("vocabulary", s["vocab_size"]),
            (
                "word starts / continuations",
                f"{pieces.get('word_starts', '-')} / {pieces.get('continuations', '-')}",
            ),
            ("sha256 of tokenizer.json", s.get("sha256")),
        ]
    )
    measured = _kv(
        [
            ("held-out documents", held.get("documents")),
            ("tokens per word", held.get("tokens_per_word")),
            ("characters per token", held.get("chars_per_token")),
            ("UNK rate", _pct(held.get("unk_rate"))),
            ("vocabulary used", _pct(held.get("vocab_used_share"))),
        ]
    )
    return (
        f'<h2>Overview</h2><div class="cols"><div>{overview}</div>'
        f"<div><h3>On held-out documents</h3>{measured}</div></div>"
        f"<h2>Special tokens</h2>{_grid(('role', 'token', 'id'), special, {2})}"
    )
