"""The terminal view of an inspection summary (the dicts of docs/inspect.md)."""

from __future__ import annotations

from typing import Any

BAR_WIDTH = 40
HIST_ROWS = 10
TOP_PER_LINE = 8
# Shard states whose checksum was not computed (no --verify).
UNHASHED = {"decoded": "decoded, sha256 not checked"}


def render(summary: dict[str, Any]) -> str:
    """Human-readable lines for a summary of any kind."""
    kind = summary["kind"]
    lines = [f"{kind}: {summary['path']}"]
    lines += {
        "shards": _shards,
        "docs": _docs,
        "tokenizer": _tokenizer,
        "run": _run,
        "finetuned": _finetuned,
        "multitask": _multitask,
        "transformers": _transformers,
    }[kind](summary)
    for problem in summary.get("problems", []):
        where = problem.get("shard") or problem.get("file") or "?"
        lines.append(f"  BAD {where}: {problem['problem']}")
    lines += [f"  warning: {w}" for w in summary.get("warnings", [])]
    return "\n".join(lines)


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def _dist(s: dict[str, Any]) -> str:
    if not s.get("count"):
        return "none"
    return (
        f"min {_n(s['min'])}  mean {s['mean']:.1f}  p50 {_n(s['p50'])}  "
        f"p95 {_n(s['p95'])}  max {_n(s['max'])}"
    )


def _bars(pairs: list[list[int]], indent: str = "             ") -> list[str]:
    """A text histogram of [[value, count], ...] in at most HIST_ROWS equal-width rows."""
    if not pairs:
        return []
    lo, hi = pairs[0][0], pairs[-1][0]
    width = max(1, -(-(hi - lo + 1) // HIST_ROWS))
    rows: dict[int, int] = {}
    for value, count in pairs:
        start = lo + (value - lo) // width * width
        rows[start] = rows.get(start, 0) + count
    top = max(rows.values())
    out = []
    for start in range(lo, hi + 1, width):
        count = rows.get(start, 0)
        label = f"{start}" if width == 1 else f"{start}-{min(hi, start + width - 1)}"
        bar = "#" * round(BAR_WIDTH * count / top)
        out.append(f"{indent}{label:>11} {bar:<{BAR_WIDTH}} {count:,}")
    return out


def _shards(s: dict[str, Any]) -> list[str]:
    premask = s["premask"]
    how = f"pre-masked ({premask['kind']}, {_pct(premask['prob'], 0)})" if premask else "unmasked"
    lines = [
        f"  mode {s['mode']}, max length {s['max_seq_len']}, {s['vocab_kind']} vocabulary of "
        f"{_n(s['vocab_size'])}, {how}",
        f"  totals     {_n(s['shards'])} shards, {_n(s['blocks'])} blocks, "
        f"{_n(s['sequences'])} sequences, {_n(s['tokens'])} tokens, {_size(s['bytes'])} "
        f"({s['bytes_per_token']:.2f} bytes/token)",
    ]
    read = s["read"]
    if read["shards"] != s["shards"]:
        lines.append(
            f"  read       {read['shards']} of {s['shards']} shards intact; the figures below "
            f"cover {_n(read['sequences'])} sequences"
        )
    lines.append(f"  length     {_dist(s['sequence_length'])}")
    lines += _bars(s["sequence_length"].get("histogram", []))
    pad = s["padding"]
    lines.append(
        f"  padding    at batch size {pad['batch_size']}: to max length {_pct(pad['static'])}, "
        f"to longest in batch {_pct(pad['dynamic'])}, length-bucketed {_pct(pad['bucketed'])}"
    )
    if s.get("pairs"):
        pairs = s["pairs"]
        shares = "  ".join(f"{k} {_pct(v)}" for k, v in pairs["label_share"].items())
        lines.append(f"  labels     {shares}")
        lines.append(f"  segment A  {_dist(pairs['segment_a'])}")
        lines.append(f"  segment B  {_dist(pairs['segment_b'])}")
    if s.get("premasked"):
        pm = s["premasked"]
        split = "  ".join(f"{k} {_pct(v)}" for k, v in pm["split"].items())
        lines.append(
            f"  masked     {_pct(pm['masked_share'], 2)} of {_n(pm['maskable_tokens'])} "
            f"maskable tokens; {split}"
        )
        lines.append(f"  per seq    {_dist(pm['predictions_per_sequence'])}")
    if s.get("encoded_by"):
        total = sum(s["encoded_by"].values())
        shares = ", ".join(f"{k} {_pct(v / total)}" for k, v in s["encoded_by"].items())
        lines.append(f"  encoded by {shares} of {_n(total)} sentences")
    lines += _token_lines(s["token_stats"])
    lines.append(f"  {'shard':<20} {'sequences':>10} {'tokens':>13} {'bytes':>10}  state")
    for shard in s["per_shard"]:
        lines.append(
            f"  {shard['name']:<20} {shard['sequences']:>10,} {shard['tokens']:>13,} "
            f"{_size(shard['bytes']):>10}  {UNHASHED.get(shard['state'], shard['state'])}"
        )
    if s["verified"] and not s["problems"]:
        lines.append("  verified: every checksum and block is intact")
    if s.get("reencode"):
        r = s["reencode"]
        lines.append(
            f"  reencoded  {_n(r['texts'])} decoded texts with {r['encoder']} and tokenizers: "
            + ("the same ids" if not r["differ"] else f"{_n(r['differ'])} differ")
        )
    for ex in s.get("examples", []):
        lines += _example_lines(ex)
    return lines


def _token_lines(t: dict[str, Any]) -> list[str]:
    lines = [
        f"  tokens     {_n(t['distinct'])} distinct; {_pct(t['never_used_share'])} of the "
        f"vocabulary never used; UNK rate {_pct(t['unk_rate'], 3)} ({_n(t['unk'])})"
        + (f"; {_n(t['out_of_vocab'])} ids OUTSIDE the vocabulary" if t["out_of_vocab"] else ""),
        "  specials   " + "  ".join(f"{k} {_n(v)}" for k, v in t["special"].items()),
    ]
    if t.get("scripts"):
        shares = ", ".join(f"{k} {_pct(v['share'])}" for k, v in t["scripts"].items())
        lines.append(f"  scripts    {shares} of the content tokens")
    entries = [f"{e['token'] or e['id']} {_pct(e['share'])}" for e in t["top"]]
    for i in range(0, len(entries), TOP_PER_LINE):
        label = f"top {len(entries)}" if i == 0 else ""
        lines.append(f"  {label:<10} " + "  ".join(entries[i : i + TOP_PER_LINE]))
    return lines


def _example_lines(ex: dict[str, Any]) -> list[str]:
    head = f"  [{ex['block']}#{ex['index']} length {ex['length']}"
    if "label" in ex:
        head += f", label {ex['label']} {ex.get('label_name') or ''}".rstrip()
    lines = [head + "]"]
    if "segment_a" in ex:
        lines.append(f"    A: {ex['segment_a']}")
        lines.append(f"    B: {ex['segment_b']}")
    else:
        lines.append(f"    {ex['text']}")
    if ex.get("predictions"):
        shown = "  ".join(
            f"@{p['position']} {p['input']}->{p['original']}"
            if p["action"] != "unchanged"
            else f"@{p['position']} ={p['original']}"
            for p in ex["predictions"]
        )
        lines.append(f"    predict: {shown}")
    return lines


def _docs(s: dict[str, Any]) -> list[str]:
    ch = s["characters"]
    lines = [
        f"  {_n(s['documents'])} documents in {s['files']} files, {_size(s['bytes'])} of text",
        f"  characters {_dist(ch)}",
    ]
    if not s["complete"]:
        lines.append("  INCOMPLETE: no .stats.json (interrupted run?)")
    for stage in s["stages"]:
        lines.append(
            f"  stage {stage['stage'] or '?'}: {_n(stage['documents_in'])} documents in, "
            f"{_n(stage['documents_out'])} out"
        )
    for reason, count in sorted(s["dropped"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  dropped {reason}: {_n(count)}")
    for key, value in s["duplicates"].items():
        lines.append(f"  {key}: {_brief(value)}")
    lines += _shares("languages", s.get("languages", {}))
    lines += _shares("scripts", s.get("scripts", {}))
    return lines


def _shares(label: str, figures: dict[str, dict[str, int]]) -> list[str]:
    """`languages  ko 120 docs 1.2 MB, en 3 docs 20 KB, ...`: documents and bytes of each."""
    if not figures:
        return []
    items = [f"{k} {_n(v['documents'])} docs {_size(v['bytes'])}" for k, v in figures.items()]
    lines = []
    for i in range(0, len(items), 4):
        lines.append(f"  {label if i == 0 else '':<10} " + ", ".join(items[i : i + 4]))
    return lines


def _brief(value: Any) -> str:
    """A number as is; a list (largest clusters) by its first few sizes or items."""
    if not isinstance(value, list):
        return _n(value)
    items = [v["size"] if isinstance(v, dict) and "size" in v else v for v in value[:5]]
    return ", ".join(str(v) for v in items) + (", ..." if len(value) > 5 else "")


def _tokenizer(s: dict[str, Any]) -> list[str]:
    pieces = s["pieces"]
    lines = [
        f"  {s['vocab_kind']}, {_n(s['vocab_size'])} tokens "
        f"({_n(pieces['word_starts'])} word starts, {_n(pieces['continuations'])} continuations)",
        "  special: " + ", ".join(f"{v['token']}={v['id']}" for v in s["special_tokens"].values()),
        f"  piece characters {_dist(pieces['characters'])}",
    ]
    stats = s.get("vocab_stats")
    if isinstance(stats, dict):
        lines.append("  vocab_stats.json:")
        lines += [f"    {key}: {value}" for key, value in _scalars(stats)]
    return lines


def _scalars(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) for every number or string, nested objects flattened."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _scalars(value, f"{prefix}{key}.")
        elif isinstance(value, float):
            out.append((prefix + key, f"{value:.4g}"))
        elif isinstance(value, int | str):
            out.append((prefix + key, value))
    return out


def _run(s: dict[str, Any]) -> list[str]:
    model = s["model"]
    lines = [
        f"  {model['family']} L{model['num_layers']}/H{model['hidden_size']}"
        f"/A{model['num_heads']}, vocab {model['vocab_size']}, data {s['data']}"
        + (f", objectives {','.join(s['objectives'])}" if s.get("objectives") else ""),
        f"  {s['logged_steps']} log lines, last step {s['last_step']}"
        + (f" of {s['max_steps']}" if s.get("max_steps") else ""),
    ]
    for name in s["losses"] + s["accuracies"] + s.get("perplexities", []):
        points = [v for _, v in s["curves"][name] if v is not None]
        if points:
            lines.append(f"  {name:<24} {points[0]:.4f} -> {points[-1]:.4f}")
    for name, stat in s.get("objective_stats", {}).items():
        if stat["mean"] is not None:
            lines.append(f"  {name:<24} {stat['mean']:.4f} mean (paper {stat['paper']:.4g})")
    tp = s["throughput"]
    if tp["tokens_per_s"]["mean"] is not None:
        lines.append(
            f"  throughput {tp['tokens_per_s']['mean']:,.0f} tokens/s mean, "
            f"{tp['tokens_per_s']['last']:,.0f} last"
        )
    last = s["last_checkpoint"]
    lines.append(
        f"  checkpoints: {', '.join(s['checkpoints']) or 'none'}"
        + (f" (last {_size(last['bytes'])})" if last else "")
    )
    return lines


def _scores(scores: dict[str, Any] | None) -> str:
    if not scores:
        return "-"
    return ", ".join(
        f"{k} {v:.2f}" for k, v in scores.items() if isinstance(v, float) and k != "seconds"
    )


def _finetuned(s: dict[str, Any]) -> list[str]:
    task, model, settings = s["task"], s["model"], s.get("settings") or {}
    start = "random weights" if s.get("random_init") else f"from {s['source']}"
    lines = [
        f"  task {task['name']} ({task['shape']}), {model['family']} "
        f"L{model['num_layers']}/H{model['hidden_size']}, {start}",
        f"  lr {settings.get('learning_rate')}, batch {settings.get('batch_size')}, "
        f"{settings.get('epochs')} epochs, max length {settings.get('max_seq_len')}",
    ]
    if s.get("multitask"):
        lines.append(f"  multi-task with {', '.join(s['multitask'])}")
    examples, skipped = s.get("examples") or {}, s.get("skipped") or {}
    if examples:
        lines.append(
            f"  examples: train {_n(examples.get('train'))} (skipped {_n(skipped.get('train'))}), "
            f"dev {_n(examples.get('dev'))}"
        )
    for epoch in s.get("epochs", []):
        loss = epoch.get("train_loss")
        shown = f"{loss:.4f}" if isinstance(loss, float) else "-"
        lines.append(
            f"  epoch {epoch['epoch']}: train loss {shown}, dev {_scores(epoch.get('dev'))}"
        )
    for trial in s.get("sweep") or []:
        lines.append(f"  sweep lr {trial['learning_rate']:g}: dev {_scores(trial['dev'])}")
    for split, scores in sorted((s.get("eval") or {}).items()):
        lines.append(f"  eval {split}: {_scores(scores)}")
    return lines


def _multitask(s: dict[str, Any]) -> list[str]:
    lines = [f"  tasks {', '.join(s['tasks'])}, from {s['source']}"]
    batches = s.get("batches_per_epoch", {})
    for task in s["tasks"]:
        line = f"  {task}: {batches.get(task)} batches/epoch, dev {_scores(s['dev'].get(task))}"
        if s.get("finetuned_dev"):
            line += f"; after fine-tuning alone {_scores(s['finetuned_dev'].get(task))}"
        lines.append(line)
    return lines


def _transformers(s: dict[str, Any]) -> list[str]:
    model = s["model"]
    lines = [
        f"  {s['class']} ({s['model_type']}), {model['num_layers']} layers, hidden "
        f"{model['hidden_size']}, vocab {model['vocab_size']}",
        f"  tokenizer {s['tokenizer'] or 'none'}",
    ]
    if s["finetuned"]:
        problem = f", {s['problem_type']}" if s.get("problem_type") else ""
        lines.append(f"  fine-tuned for task {s['task'] or '?'}{problem}")
        lines.append(f"  labels {', '.join(map(str, s['labels']))}")
    if s.get("generator"):
        lines.append(f"  generator/: {s['generator']}")
    return lines
