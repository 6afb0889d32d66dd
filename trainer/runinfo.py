"""Summary of a training run directory: config, loss curve, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.checkpoint import committed_steps, step_dir
from trainer.loop import CONFIG_FILE, METRICS_FILE


def run_summary(run: Path) -> dict[str, Any]:
    config = json.loads((run / CONFIG_FILE).read_text(encoding="utf-8"))
    metrics_path = run / METRICS_FILE
    metrics = (
        [json.loads(line) for line in metrics_path.read_text(encoding="utf-8").splitlines() if line]
        if metrics_path.is_file()
        else []
    )
    steps = committed_steps(run)
    model = config.get("model", {})
    return {
        "kind": "run",
        "path": str(run),
        "model": {
            k: model.get(k)
            for k in ("family", "num_layers", "hidden_size", "num_heads", "vocab_size")
        },
        "data": config.get("data"),
        "logged_steps": len(metrics),
        "last_step": metrics[-1]["step"] if metrics else 0,
        "first": metrics[0] if metrics else None,
        "last": metrics[-1] if metrics else None,
        "checkpoints": [str(step_dir(run, s).name) for s in steps],
        "tokens_per_s": (
            sum(m["tokens_per_s"] for m in metrics) / len(metrics) if metrics else None
        ),
    }
