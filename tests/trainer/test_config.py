import json
from dataclasses import replace

import pytest
import torch

from clozeworks.cli import main
from clozeworks.schemas.errors import BadInputError, UsageError
from clozeworks.trainer.config import OptimConfig, load_config_file
from clozeworks.trainer.optim import build_scheduler, warmup_problem, warmup_steps
from clozeworks.trainer.presets import MODEL_PRESETS, preset


def test_a_toml_file_overrides_any_field(tmp_path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        'objectives = ["mlm", "sop"]\ngrad_accum = 4\n'
        '[model]\nfamily = "albert"\nembedding_size = 64\nshare = "ffn"\n'
        '[optim]\nname = "lamb"\nlr = 2e-3\n'
        '[masking]\nkind = "ngram"\n'
        '[phase2]\ndata = "shards512"\nstart_step = 900\nbatch_size = 8\n',
        encoding="utf-8",
    )
    config = load_config_file(path, preset("bert-base"))
    assert config.objectives == ("mlm", "sop") and config.grad_accum == 4
    assert (config.model.family, config.model.embedding_size, config.model.share) == (
        "albert",
        64,
        "ffn",
    )
    assert config.model.hidden_size == 768  # untouched fields keep the preset's value
    assert (config.optim.name, config.optim.lr, config.optim.beta2) == ("lamb", 2e-3, 0.999)
    assert config.masking.kind == "ngram"
    assert config.phase2 is not None and config.phase2.start_step == 900


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[model]\nhiden_size = 3\n", "unknown model setting"),
        ("bogus = 1\n", "unknown setting 'bogus'"),
        ('[masking]\nkind = "words"\n', "masking"),
        ('objectives = ["mlm", "xyz"]\n', r"objectives must be one of mlm, .*, got 'xyz'"),
        # Values that once gave a traceback, or were accepted and failed later.
        ("[model]\nnum_heads = 0\n", r"model\.num_heads must be >= 1"),
        ("[model]\nhidden_size = -8\n", r"model\.hidden_size must be >= 1"),
        ("[model]\nnum_layers = 0\n", r"model\.num_layers must be >= 1"),
        ("[model]\ndropout = 2\n", r"model\.dropout must be in \[0, 1\)"),
        ('[model]\nhidden_size = "768"\n', r"model\.hidden_size must be a number, got '768'"),
        ("[model]\npre_ln = 1\n", r"model\.pre_ln must be true or false, got 1"),
        ("[optim]\nlr = nan\n", r"optim\.lr must be in \(0, inf\), got nan"),
        ("[optim]\nlr = 0\n", r"optim\.lr must be in"),
        ("[optim]\nwarmup_steps = -5\n", r"optim\.warmup_steps must be >= 0"),
        ("[optim]\nbeta2 = 1.0\n", r"optim\.beta2 must be in \[0, 1\)"),
        ("keep = 0\n", "keep must be >= 1"),
        ("batch_size = true\n", "batch_size must be a number, got True"),
        ("batch_size = 2.5\n", "batch_size must be whole, got 2.5"),
        # torch and numpy took these with a traceback
        ("seed = 18446744073709551616\n", r"seed must be in \[0, 2\*\*63 - 1\], got 1844"),
        ("shard_cache_gb = -1.0\n", r"shard_cache_gb must be in \[0, inf\), got -1"),
        ("shard_cache_gb = nan\n", r"shard_cache_gb must be in \[0, inf\), got nan"),
        ("seed = -1\n", r"seed must be in \[0, 2\*\*63 - 1\], got -1"),
    ],
)
def test_bad_settings_are_named(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as caught:
        load_config_file(path, preset("bert-tiny"))
    assert str(caught.value).startswith(str(path))  # names the file it came from


def test_a_file_that_is_not_toml_is_bad_input(tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[model\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"bad\.toml"):
        load_config_file(path, preset("bert-tiny"))


def test_presets_follow_the_papers() -> None:
    sizes = {name: (m.num_layers, m.hidden_size, m.num_heads) for name, m in MODEL_PRESETS.items()}
    assert sizes["bert-tiny"] == (2, 128, 2) and sizes["bert-large"] == (24, 1024, 16)
    assert preset("roberta-base").optim.beta2 == 0.98 and preset("roberta-base").optim.eps == 1e-6
    assert preset("roberta-base").model.type_vocab_size == 0
    albert = preset("albert-base")
    assert (albert.model.embedding_size, albert.model.share, albert.optim.name) == (
        128,
        "all",
        "lamb",
    )
    electra = preset("electra-small")
    assert electra.objectives == ("mlm", "rtd") and electra.masking.random_ratio == 0.0
    bert = preset("bert-base").optim
    assert (bert.lr, bert.beta1, bert.beta2, bert.weight_decay, bert.warmup_steps) == (
        1e-4,
        0.9,
        0.999,
        0.01,
        10_000,
    )


def test_bad_flag_values_are_one_line_errors(tmp_path, capsys) -> None:
    for flags in (["--lr", "nan"], ["--warmup-steps", "-5"], ["--batch-size", "0"]):
        code = main(["train", "--data", str(tmp_path), "--output", str(tmp_path / "r"), *flags])
        err = capsys.readouterr().err.strip()
        # Named as the flag typed, not as the field it sets.
        assert code == 2 and f"error: {flags[0]} must be " in err and "\n" not in err, (flags, err)


def _printed(capsys, *flags: str) -> dict:
    assert main(["train", "--print-config", *flags]) == 0
    return json.loads(capsys.readouterr().out)["optim"]


def test_warmup_as_a_share_or_in_steps(tmp_path, capsys) -> None:
    assert _printed(capsys)["warmup_steps"] == 10_000  # BERT's, as the paper gives it
    share_of_run = _printed(capsys, "--warmup", "6%")
    assert share_of_run["warmup_ratio"] == pytest.approx(0.06)
    assert "warmup_steps" not in share_of_run  # does not apply: not shown, not saved
    assert _printed(capsys, "--warmup", "0.06")["warmup_ratio"] == pytest.approx(0.06)
    share = tmp_path / "share.toml"
    share.write_text("[optim]\nwarmup_ratio = 0.1\n", encoding="utf-8")
    # Steps on the command line replace a share from the file (and the other way round).
    steps = _printed(capsys, "--config", str(share), "--warmup", "500")
    assert (steps["warmup_steps"], steps["warmup_ratio"]) == (500, None)
    steps = _printed(capsys, "--config", str(share), "--warmup-steps", "400")
    assert (steps["warmup_steps"], steps["warmup_ratio"]) == (400, None)
    optim = OptimConfig(lr=1.0, warmup_ratio=0.1)
    assert warmup_steps(optim, 1000) == 100 and warmup_steps(replace(optim, decay_steps=50), 9) == 5
    # The rate peaks at the end of the warm-up the share gives.
    layer = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(layer.parameters(), lr=1.0)
    schedule = build_scheduler(opt, optim, 1000)
    rates = []
    for _ in range(200):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert rates.index(max(rates)) == 99 and max(rates) == pytest.approx(1.0)
    for bad in ("abc", "1.5", "-0.1"):
        assert main(["train", "--print-config", "--warmup", bad]) == 2
        assert "--warmup" in capsys.readouterr().err


def test_a_warmup_as_long_as_the_run_is_refused_unless_forced(shards_dir, tmp_path, capsys):
    common = ["train", "--data", str(shards_dir), "--batch-size", "4", "--no-progress"]
    run = ["--output", str(tmp_path / "run"), "--max-steps", "2"]
    assert main([*common, *run]) == 2
    err = capsys.readouterr().err
    assert "a warm-up of 10,000 steps is at least the run's 2" in err and "--force-warmup" in err
    assert not (tmp_path / "run").exists()
    assert main([*common, *run, "--force-warmup"]) == 0
    assert warmup_problem(OptimConfig(warmup_steps=2), 3) is None
    assert warmup_problem(OptimConfig(warmup_steps=3), 3) is not None


def test_print_config_with_shards_is_what_the_run_uses(nsp_shards, tmp_path, capsys) -> None:
    """--print-config with --data shows the shards' vocabulary, pad id and pair objective
    (it showed BERT's 30522 and [mlm] for an 8000-token nsp set), and the run's
    config.json says the same."""
    manifest = json.loads((nsp_shards / ".manifest.json").read_text())
    flags = ["--data", str(nsp_shards), "--warmup", "0.5", "--max-steps", "1", "--batch-size", "4"]
    assert main(["train", "--print-config", *flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["model"]["vocab_size"] == manifest["vocab_size"] != 30522
    assert printed["model"]["pad_token_id"] == manifest["special_tokens"]["pad"]
    assert printed["objectives"] == ["mlm", "nsp"]
    run = tmp_path / "run"
    assert main(["train", *flags, "--output", str(run)]) == 0
    saved = json.loads((run / "config.json").read_text())
    assert {k: saved[k] for k in printed} == printed
