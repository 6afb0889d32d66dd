"""Issue 34's list, tried as a new user would, on one checkout: one line per item.

    python bench/practitioner/run.py --work /tmp/p34 [--pythonpath DIR]

`--pythonpath` runs another version (a wheel installed with `pip install --target DIR`),
so the same script gives the before and after lines. The corpus is real text on this
machine: Python's reST documentation and Debian's copyright files, written as a jsonl
whose text field is `content` (a crawl), txt files and a Parquet file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

RST = Path("/usr/share/doc/python3.11/html/_sources")
COPYRIGHT = Path("/usr/share/doc")


def corpus(raw: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [p.read_text(errors="replace") for p in sorted(RST.rglob("*.rst.txt"))]
    texts = [t for t in texts if len(t) > 2000]
    rights = [p.read_text(errors="replace") for p in sorted(COPYRIGHT.glob("*/copyright"))]
    (raw / "crawl").mkdir(parents=True, exist_ok=True)
    with open(raw / "crawl" / "pages.jsonl", "w") as f:
        for i, text in enumerate(texts[: len(texts) // 2]):
            f.write(json.dumps({"content": text, "url": f"https://docs/{i}", "lang": "en"}) + "\n")
    (raw / "debian").mkdir(exist_ok=True)
    for i, text in enumerate(rights[:300]):
        (raw / "debian" / f"copyright-{i:03d}.txt").write_text(text)
    table = pa.table({"text": texts[len(texts) // 2 :]})
    pq.write_table(table, raw / "docs.parquet")


class Version:
    def __init__(self, pythonpath: str | None, work: Path) -> None:
        self.env = dict(os.environ, CLOZEWORKS_LOG_EVERY="1", PYTHONUNBUFFERED="1")
        if pythonpath:
            self.env["PYTHONPATH"] = pythonpath
        self.work = work

    def run(self, *argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "clozeworks", *argv]
        return subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.work
        )

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
            cwd=self.work,
        )  # fmt: skip


def last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "(nothing)"


def outcome(r: subprocess.CompletedProcess[str]) -> str:
    """The exit code and the run's last word: its summary, or its error."""
    return f"exit {r.returncode}: {last(r.stdout if r.returncode == 0 else r.stderr)}"


def say(item: str, command: str, result: str) -> None:
    print(f"{item} | `{command}` | {result}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--pythonpath")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "raw").exists():
        corpus(work / "raw")
    v = Version(args.pythonpath, work)

    # 2. Mixed inputs.
    r = v.run("clean", "--input", "raw", "--output", "mixed")
    say(
        "2 mixed inputs",
        "cloze clean --input raw",
        f"exit {r.returncode}: {last(r.stdout + r.stderr)}",
    )
    r = v.run(
        "clean", "--input", "raw", "--output", "clean", "--fields", "raw/crawl/*:text=content",
        "--meta-fields", "url,lang",
    )  # fmt: skip
    say("2 per-file fields", "--fields 'raw/crawl/*:text=content' --meta-fields url,lang",
        outcome(r))  # fmt: skip
    clean = "clean" if r.returncode == 0 else "mixed"

    # 1. Progress without a terminal (stderr is a pipe here).
    r = v.run("dedup", "--input", clean, "--output", "docs", "--near")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    say("1 corpus stage, no tty", "cloze dedup --near 2>&1 | cat",
        f"{len(lines)} stderr lines; last: {last(r.stderr)}")  # fmt: skip

    # 8. vocab warns on its README thresholds.
    r = v.run("vocab", "--input", "docs", "--output", "tok-small", "--vocab-size", "300")
    warned = [x for x in r.stderr.splitlines() if "warning" in x.lower()]
    say("8 vocab thresholds", "cloze vocab --vocab-size 300",
        warned[0][:160] if warned else f"no warning (exit {r.returncode})")  # fmt: skip
    v.run("vocab", "--input", "docs", "--output", "tok", "--vocab-size", "8000")
    r = v.run("shard", "--input", "docs", "--tokenizer", "tok", "--output", "shards",
              "--mode", "nsp", "--max-seq-len", "128")  # fmt: skip
    say("- shard", "cloze shard --mode nsp", f"exit {r.returncode}: {last(r.stdout)}")

    # 3. --print-config with the shards.
    r = v.run("train", "--data", "shards", "--print-config", "--warmup", "0.06")
    if r.returncode == 0:
        c = json.loads(r.stdout)
        steps = c["optim"].get("warmup_steps", "absent")
        model = c["model"]["vocab_size"]
        said = f"vocab_size {model}, objectives {c['objectives']}, warmup_steps {steps}"
    else:
        said = f"exit {r.returncode}: {last(r.stderr)}"
    say("3 print-config", "cloze train --data shards --print-config --warmup 0.06", said)

    # 1. train without a terminal; 7. trackers and fp16.
    train = ["train", "--data", "shards", "--preset", "bert-tiny", "--batch-size", "16",
             "--max-steps", "60", "--warmup", "0.1", "--log-every", "20"]  # fmt: skip
    r = v.run(*train, "--output", "run")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    print(f"(load average {os.getloadavg()[0]:.2f})", flush=True)
    say("1 train, no tty", "cloze train ... 2>&1 | cat",
        f"{len(lines)} stderr lines; first: {lines[0][:150] if lines else '-'}")  # fmt: skip
    r = v.run(*train, "--output", "run-mlflow", "--report-to", "mlflow", "--max-steps", "20")
    say(
        "7 trackers",
        "cloze train --report-to mlflow",
        outcome(r),
    )
    r = v.run(*train, "--output", "run-fp16", "--precision", "fp16", "--max-steps", "20")
    say(
        "7 fp16",
        "cloze train --precision fp16",
        outcome(r),
    )
    r = v.run("export", "--run", "run", "--output", "hf")
    card = (work / "hf" / "README.md").is_file()
    say(
        "7 model card",
        "cloze export --run run",
        f"exit {r.returncode}; README.md {'written' if card else 'absent'}",
    )

    # 4. build against the stages one by one.
    r = v.run("build", "--input", "raw/debian", "--output", "built", "--near", "--vocab-size",
              "2000", "--mode", "nsp")  # fmt: skip
    for step in (
        ["clean", "--input", "raw/debian", "--output", "st/clean"],
        ["dedup", "--input", "st/clean", "--output", "st/docs", "--near"],
        ["vocab", "--input", "st/docs", "--output", "st/tokenizer", "--vocab-size", "2000"],
        ["shard", "--input", "st/docs", "--tokenizer", "st/tokenizer", "--output", "st/shards",
         "--mode", "nsp"],
    ):  # fmt: skip
        v.run(*step)
    seeds = []
    for root in ("built", "st"):
        stats = next((work / root / "docs").glob("*stats.json"))
        data = json.loads(stats.read_text())
        seeds.append(f"{root}: seed {data.get('seed')}, {data.get('duplicates')} duplicates")
    same = differ = 0
    for path in sorted((work / "st").rglob("*")):
        twin = work / "built" / path.relative_to(work / "st")
        if path.is_file() and "lock" not in path.name and twin.is_file():
            # The JSON records name their inputs, as given: the roots differ, nothing else may.
            a = path.read_bytes().replace(str(work / "st").encode(), b"R")
            b = twin.read_bytes().replace(str(work / "built").encode(), b"R")
            a, b = a.replace(b'"st/', b'"R/'), b.replace(b'"built/', b'"R/')
            same, differ = same + (a == b), differ + (a != b)
    say("4 build = stages", "cloze build --near vs clean, dedup --near, vocab, shard",
        f"{'; '.join(seeds)}; {same} files identical, {differ} differ")  # fmt: skip

    # 5. Ctrl-C in shard.
    proc = subprocess.Popen(
        [sys.executable, "-m", "clozeworks", "shard", "--input", "docs", "--tokenizer", "tok",
         "--output", "shards-int", "--mode", "nsp", "--dupe-factor", "5", "--premask", "token"],
        env=v.env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(6)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [x for x in err.splitlines() if x.strip() and "elapsed" not in x]  # not progress
    say("5 Ctrl-C in shard", "SIGINT to cloze shard after 6 s",
        f"exit {proc.returncode}, {len(lines)} lines: {last(chr(10).join(lines))}")  # fmt: skip

    # 6. Dataset readers on a store and a shard set.
    r = v.python(READERS)
    say("6 dataset readers", "pq.read_table / load_dataset(data_dir=)", last(r.stdout or r.stderr))


READERS = """
import pyarrow.parquet as pq, datasets
def rows(kind, path):
    return len(datasets.load_dataset(kind, data_dir=path, split="train"))
out = []
for name, call in [
    ("pq.read_table(docs)", lambda: pq.read_table("docs").num_rows),
    ("load_dataset parquet", lambda: rows("parquet", "docs")),
    ("load_dataset webdataset", lambda: rows("webdataset", "shards")),
]:
    try:
        out.append(f"{name}: {call()} rows")
    except Exception as e:
        out.append(f"{name}: {type(e).__name__}")
print("; ".join(out))
"""


if __name__ == "__main__":
    main()
