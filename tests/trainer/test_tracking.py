"""`--report-to` (issue 34, item 7): W&B in offline mode and MLflow on a file store get the
same figures as metrics.jsonl, under the train/ and eval/ groups, and a resumed run goes on
in the same tracker runs. Both trackers are the real packages, with no server."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from clozeworks.cli import main
from clozeworks.trainer.tracking import IDS_FILE, mlflow_uri, scalars_of, tensorboard_tag

wandb = pytest.importorskip("wandb")
mlflow = pytest.importorskip("mlflow")


def _args(shards: Path, run: Path, steps: int) -> list[str]:
    return [
        "train", "--data", str(shards), "--output", str(run), "--preset", "bert-tiny",
        "--max-steps", str(steps), "--log-every", "2", "--batch-size", "8", "--warmup", "0.1",
        "--save-every", "4", "--eval-split", "0.1", "--eval-every", "4", "--eval-batches", "2",
        "--report-to", "wandb,mlflow", "--no-progress", "--seed", "3",
    ]  # fmt: skip


def _wandb_records(path: Path) -> list:
    """The protobuf records of an offline W&B run file. wandb 0.31 reads it only in its Go
    core, so its framing is read here: a 7-byte header (`:W&B`, magic, version), then
    LevelDB's log format (32 KiB blocks; records of crc32c, length, type: 1 whole, 2 first,
    3 middle, 4 last piece)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, pieces, records = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left  # the block's tail is padding
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pieces = chunk if kind in (1, 2) else pieces + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pieces)
            records.append(record)
    return records


def _key(item) -> str:
    return "/".join(item.nested_key) or item.key


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_tags_are_grouped() -> None:
    assert tensorboard_tag("eval_mlm_loss") == "eval/mlm_loss"
    assert tensorboard_tag("mlm_loss") == "train/mlm_loss"
    assert scalars_of({"step": 4, "loss": 2.0, "lr": 1e-4, "eval_loss": 3.0, "flag": True}) == {
        "train/loss": 2.0,
        "train/lr": 1e-4,
        "eval/loss": 3.0,
    }


def test_wandb_offline_and_mlflow_get_what_metrics_jsonl_has(
    shards_dir, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "run"
    assert main(_args(shards_dir, run, 4)) == 0
    records = _records(run)
    config = json.loads((run / "config.json").read_text())
    assert config["report_to"] == ["wandb", "mlflow"]
    ids = json.loads((run / IDS_FILE).read_text())

    # MLflow: every logged step of every figure, and the settings as parameters.
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri(run))
    history = client.get_metric_history(ids["mlflow"], "train/mlm_loss")
    assert [(m.step, m.value) for m in history] == [(r["step"], r["mlm_loss"]) for r in records]
    evals = client.get_metric_history(ids["mlflow"], "eval/mlm_loss")
    assert [m.value for m in evals] == [r["eval_mlm_loss"] for r in records if "eval_mlm_loss" in r]
    params = client.get_run(ids["mlflow"]).data.params
    assert params["optim.lr"] == str(config["optim"]["lr"]) and params["seed"] == "3"

    # W&B offline: the run's records under RUN/wandb, each logged line as history.
    (offline,) = (run / "wandb").glob(f"offline-run-*-{ids['wandb']}/run-*.wandb")
    history = [r.history for r in _wandb_records(offline) if r.HasField("history")]
    logged = {
        h.step.num: {"/".join(i.nested_key) or i.key: i.value_json for i in h.item} for h in history
    }
    assert sorted(logged) == [r["step"] for r in records]
    for r in records:
        assert float(logged[r["step"]]["train/mlm_loss"]) == pytest.approx(r["mlm_loss"])
    last = logged[records[-1]["step"]]
    assert float(last["eval/mlm_loss"]) == pytest.approx(records[-1]["eval_mlm_loss"])
    (start,) = [r.run for r in _wandb_records(offline) if r.HasField("run")]
    settings = {i.key: i.value_json for i in start.config.update}
    assert json.loads(settings["seed"]) == 3 and json.loads(settings["optim"])["lr"] > 0

    # A resumed run goes on in the same MLflow and W&B runs.
    assert main([*_args(shards_dir, run, 8), "--resume"]) == 0
    assert json.loads((run / IDS_FILE).read_text()) == ids
    history = client.get_metric_history(ids["mlflow"], "train/mlm_loss")
    assert [m.step for m in history] == [2, 4, 6, 8]
    assert [m.value for m in history] == [r["mlm_loss"] for r in _records(run)]


def test_an_unknown_tracker_is_one_line(shards_dir, tmp_path, capsys) -> None:
    args = _args(shards_dir, tmp_path / "run", 2)
    args[args.index("wandb,mlflow")] = "wandb,neptune"
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown tracker(s) neptune" in err


def test_a_tracker_not_installed_names_its_extra(shards_dir, tmp_path, monkeypatch, capsys) -> None:
    from clozeworks.trainer import tracking

    monkeypatch.setitem(tracking._MODULES, "wandb", "clozeworks_no_such_module")
    run = tmp_path / "run"
    assert main(_args(shards_dir, run, 2)) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "cloze train: error: --report-to wandb: not installed (pip install 'clozeworks[wandb]')"
    )
    assert not run.exists()  # refused before anything was written
