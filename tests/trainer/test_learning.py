"""It learns: bert-tiny on the standard library's docstrings predicts held-out masked tokens
far better than always guessing the most frequent token. Held-out documents are never
trained on: every tenth docstring goes to its own shard set, encoded with the same
vocabulary (the session's WordPiece tokenizer), packed and written with the real shard writer.
"""

import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from clozeworks.corpus.shards.blocks import make_block, write_blocks, write_manifest
from clozeworks.corpus.text.demo import iter_docstrings
from clozeworks.corpus.vocab.train import load_tokenizer
from clozeworks.schemas.manifest import read_manifest
from clozeworks.schemas.sidecars import TOKENIZER_DIR
from clozeworks.trainer.config import override
from clozeworks.trainer.data.loader import ShardDataset
from clozeworks.trainer.loop import train
from clozeworks.trainer.presets import preset

DOCS = 3000
LENGTH = 128
STEPS = 700


def write_shards(docs: list[str], source: Path, target: Path) -> Path:
    """Docstrings packed into [CLS] ... [SEP] sequences of up to LENGTH tokens."""
    manifest = read_manifest(source)
    tok = load_tokenizer(source / TOKENIZER_DIR).tokenizer
    cls, sep = manifest.special_tokens["cls"], manifest.special_tokens["sep"]
    stream = [i for enc in tok.encode_batch(docs, add_special_tokens=False) for i in enc.ids]
    body = LENGTH - 2
    seqs = [np.array([cls, *stream[i : i + body], sep]) for i in range(0, len(stream) - body, body)]
    np.random.default_rng(0).shuffle(seqs)
    target.mkdir()
    blocks = [make_block(seqs[i : i + 512], manifest.token_dtype) for i in range(0, len(seqs), 512)]
    info = write_blocks(target, 0, manifest.token_dtype, blocks)
    write_manifest(target, replace(manifest, max_seq_len=LENGTH, shards=(info,)))
    # The tokenizer travels with the shards (training refuses a set it could not export).
    shutil.copytree(source / TOKENIZER_DIR, target / TOKENIZER_DIR)
    return target


def frequency_baseline(shards: Path, batches: int, batch_size: int) -> float:
    """Accuracy of always predicting the most frequent masked token of the held-out batches."""
    counts: Counter[int] = Counter()
    for i, batch in enumerate(ShardDataset(shards, batch_size=batch_size, seed=0).loader()):
        if i >= batches:
            break
        labels = batch["labels"]
        counts.update(labels[labels != -100].tolist())
    return counts.most_common(1)[0][1] / sum(counts.values())


@pytest.mark.slow
def test_bert_tiny_beats_the_frequency_baseline_on_held_out_docstrings(
    shards_dir, tmp_path
) -> None:
    docs = [d["text"] for _, d in zip(range(DOCS), iter_docstrings(), strict=False)]
    train_set = write_shards([d for i, d in enumerate(docs) if i % 10], shards_dir, tmp_path / "t")
    held = write_shards([d for i, d in enumerate(docs) if not i % 10], shards_dir, tmp_path / "h")

    config = override(preset("bert-tiny"), "optim", lr=1e-3, warmup_steps=STEPS // 10)
    config = override(
        config,
        "",
        max_steps=STEPS,
        batch_size=32,
        save_every=STEPS,
        log_every=50,
        eval_data=str(held),
        eval_batches=20,
        report_to=(),
    )
    summary = train(config, train_set, tmp_path / "run", progress=False)
    assert summary.eval is not None
    accuracy = summary.eval["eval_mlm_accuracy"]
    baseline = frequency_baseline(held, 20, 32)
    print(f"held-out MLM accuracy {accuracy:.3f}, frequency baseline {baseline:.3f}")
    assert baseline < 0.15
    # Measured at 700 steps: 0.129 against a baseline of 0.053, at the demo's rate (1e-3).
    # At the 3e-3 this test once used (0.155 then) the model now stays on the unigram
    # plateau for all 700 steps (loss 6.0, these tokens' unigram entropy), as transformers'
    # BertForMaskedLM from the same weights does: the rate is too high, not the model wrong.
    assert accuracy > 2 * baseline, (accuracy, baseline)
