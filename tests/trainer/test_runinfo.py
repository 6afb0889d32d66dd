import json
from pathlib import Path

import pytest

from clozeworks.schemas.errors import BadInputError
from clozeworks.trainer.runinfo import run_summary


def make_run(run: Path, records: list, tail: str = "") -> Path:
    run.mkdir()
    config = {
        "model": {
            "family": "bert",
            "num_layers": 2,
            "hidden_size": 128,
            "num_heads": 2,
            "vocab_size": 1000,
        },
        "max_steps": 30,
        "batch_size": 8,
        "data": "shards",
    }
    (run / "config.json").write_text(json.dumps(config))
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (run / "metrics.jsonl").write_text(lines + tail)
    for step, committed in ((10, True), (20, True), (30, False)):
        d = run / f"step-{step:07d}"
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"\0" * 100)
        (d / "state.json").write_text(json.dumps({"train": {"step": step, "tokens": step * 50}}))
        if committed:
            (d / "COMMITTED").write_text(f"{step}\n")
    return run


def test_curves_every_objective_and_eval_split(tmp_path) -> None:
    records = [
        {
            "step": s,
            "mlm_loss": 7.0 - s / 10,
            "mlm_accuracy": s / 100,
            "nsp_loss": 0.7,
            "lr": 1e-4,
            "tokens_per_s": 1000.0 + s,
            "sequences_per_s": 10.0,
        }
        for s in (5, 10, 15, 20)
    ]
    records[1].update(eval_mlm_loss=6.6, eval_loss=6.7)  # the trainer's held-out keys
    records.insert(2, {"step": 10, "split": "eval", "mlm_loss": 6.5, "mlm_accuracy": 0.1})
    records.append({"step": 25, "mlm_loss": float("nan"), "mlm_accuracy": 0.2})
    run = make_run(tmp_path / "run", records, tail='{"step": 30, "mlm_lo')
    s = run_summary(run)
    assert s["curves"]["mlm_loss"][:2] == [[5, 6.5], [10, 6.0]]
    assert s["curves"]["mlm_loss"][-1] == [25, None]
    assert s["last"]["mlm_loss"] is None  # NaN would not be strict JSON
    assert s["curves"]["eval/mlm_loss"] == [[10, 6.5]]
    assert s["curves"]["eval_mlm_loss"] == [[10, 6.6]]
    assert s["losses"] == ["eval/mlm_loss", "eval_loss", "eval_mlm_loss", "mlm_loss", "nsp_loss"]
    assert s["accuracies"] == ["eval/mlm_accuracy", "mlm_accuracy"]
    assert s["logged_steps"] == 5 and s["last_step"] == 25
    assert s["checkpoints"] == ["step-0000010", "step-0000020"]
    last = s["last_checkpoint"]
    assert (last["name"], last["step"], last["tokens"]) == ("step-0000020", 20, 1000)
    assert last["bytes"] > 100
    assert s["throughput"]["tokens_per_s"] == {"mean": pytest.approx(1012.5), "last": 1020.0}
    assert s["tokens_per_s"] == pytest.approx(1012.5)
    assert s["warnings"] == [f"{run / 'metrics.jsonl'}: line 7 is not JSON (skipped)"]
    assert s["problems"] == []


def test_empty_and_broken_runs(tmp_path) -> None:
    s = run_summary(make_run(tmp_path / "empty", []))
    assert s["curves"] == {} and s["first"] is None and s["last_step"] == 0
    assert s["throughput"]["tokens_per_s"] == {"mean": None, "last": None}
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("[1,")
    with pytest.raises(BadInputError, match=r"config\.json: not valid JSON"):
        run_summary(bad)
