"""Fine-tuning throughput: `cloze finetune` vs transformers' `Trainer`, same model and task.

    .venv/bin/pip install accelerate       # Trainer needs it (bench/requirements.txt)
    .venv/bin/python bench/finetune/run.py --preset bert-small --train 4096

The task: paragraphs of real text (Python's reST docs, Debian copyright files, man pages:
bench/scale/corpus.py), their first 100 words, labelled by which of the three they come
from (3 classes, JSON lines and a TOML task file). The model: the preset's architecture
with a WordPiece vocabulary trained on the task's text, saved as a transformers directory
(`BertForPreTraining`), which both sides load, so they start from the same weights.
Both run one epoch of BERT's recipe (batch 32, lr 2e-5, 10% warm-up, weight decay 0.01,
max length 128, padding per batch, fp32 on the CPU, one process each, back to back);
examples/s is over the training loop alone (ours: finetune.json; Trainer's own
`train_samples_per_second`). Batches hold the same examples in a different order (each
side shuffles with its own seed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from bench.scale.corpus import SOURCES, _read  # noqa: E402

TRAINER = """
import json, sys, time
from pathlib import Path
import torch, transformers
hf_dir, data, work, batch = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
labels = ["python", "copyright", "man"]
tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
rows = [json.loads(l) for l in (data / "train.jsonl").open()]
enc = tok([r["text"] for r in rows], truncation=True, max_length=128,
          return_token_type_ids=True)
ds = [{"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
       "attention_mask": enc["attention_mask"][i], "labels": labels.index(r["source"])}
      for i, r in enumerate(rows)]
model = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir, num_labels=3)
args = transformers.TrainingArguments(
    output_dir=work, per_device_train_batch_size=batch, num_train_epochs=1,
    learning_rate=2e-5, warmup_steps=0.1, weight_decay=0.01, adam_epsilon=1e-6,
    max_grad_norm=1.0, save_strategy="no", report_to=[], logging_strategy="no",
    use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
trainer = transformers.Trainer(model=model, args=args, train_dataset=ds,
    data_collator=transformers.DataCollatorWithPadding(tok))
out = trainer.train()
print(json.dumps({"examples_per_s": out.metrics["train_samples_per_second"],
                  "seconds": out.metrics["train_runtime"]}))
"""

TASK = """name = "source"
shape = "single"
format = "jsonl"
text_a = "text"
label = "source"
labels = ["python", "copyright", "man"]
metrics = ["accuracy"]
[files]
train = "train.jsonl"
"""


def examples(count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    by_source: dict[str, list[str]] = {}
    for (root, pattern), name in zip(SOURCES, ("python", "copyright", "man"), strict=True):
        texts = []
        for path in sorted(Path(root).glob(pattern)):
            if path.is_file():
                for block in re.split(r"\n\s*\n", _read(path)):
                    words = block.split()
                    if len(words) >= 20:
                        texts.append(" ".join(words[:100]))
        by_source[name] = sorted(set(texts))
    out = []
    for i in range(count):
        name = ("python", "copyright", "man")[i % 3]
        out.append({"text": rng.choice(by_source[name]), "source": name})
    rng.shuffle(out)
    return out


def make_model(work: Path, preset: str, rows: list[dict[str, str]]) -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer

    from clozeworks.trainer.config import override
    from clozeworks.trainer.families import build_model, to_transformers
    from clozeworks.trainer.presets import preset as get_preset

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(
        (r["text"] for r in rows), WordPieceTrainer(vocab_size=8000, special_tokens=special)
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    config = get_preset(preset)
    config = override(config, "model", vocab_size=tok.get_vocab_size())
    config = override(config, "", objectives=("mlm", "nsp"))
    (_, hf), *_ = to_transformers(build_model(config), config)
    hf_dir = work / "pretrained"
    hf.save_pretrained(hf_dir)
    tok.save(str(hf_dir / "tokenizer.json"))
    fast = __import__("transformers").PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(hf_dir)
    return hf_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="bert-small")
    parser.add_argument("--train", type=int, default=4096, help="training examples")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    work = ROOT / "bench" / "out" / "finetune"
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    data.mkdir(parents=True)
    rows = examples(args.train, seed=0)
    with (data / "train.jsonl").open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (work / "task.toml").write_text(TASK, encoding="utf-8")
    hf_dir = make_model(work, args.preset, rows)
    print(f"{args.preset}, {len(rows)} examples, batch {args.batch_size}, {os.cpu_count()} cores")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    ours_cmd = [sys.executable, "-m", "clozeworks", "finetune", "--run", str(hf_dir)]
    ours_cmd += ["--task", str(work / "task.toml"), "--data", str(data)]
    ours_cmd += ["--output", str(work / "ours"), "--epochs", "1", "--no-progress"]
    ours_cmd += ["--batch-size", str(args.batch_size), "--device", "cpu"]
    subprocess.run(ours_cmd, check=True, stdout=subprocess.DEVNULL)
    ours = json.loads((work / "ours" / "finetune.json").read_text())
    hf_cmd = [sys.executable, "-c", TRAINER, str(hf_dir), str(data), str(work / "hf")]
    done = subprocess.run([*hf_cmd, str(args.batch_size)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"transformers' Trainer failed:\n{done.stderr[-3000:]}")
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    a, b = ours["train_examples_per_second"], theirs["examples_per_s"]
    print("| contender | examples/s | loop seconds |")
    print("|---|---|---|")
    print(f"| cloze finetune | {a:.1f} | {ours['train_seconds']:.1f} |")
    print(f"| transformers Trainer | {b:.1f} | {theirs['seconds']:.1f} |")
    print(f"ratio ours / Trainer: {a / b:.2f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
