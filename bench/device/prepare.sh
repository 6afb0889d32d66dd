#!/usr/bin/env bash
# Makes here what bench/device/run.sh needs on a lent GPU machine, which has no network and
# an image with PyTorch, transformers, tokenizers and pyarrow but not Beam or our package:
#   .whl/      wheels for its Python (3.12, x86-64): clozeworks itself, built from this tree,
#              and what the image lacks, at the versions of this .venv
#   .devdata/  a WordPiece tokenizer (30,522), NSP shards at lengths 128 and 512 made by
#              `cloze shard` from bench/scale documents, the paragraphs those documents are
#              drawn from (the machine has no Python docs or man pages), and GNU time
# Both folders are git-ignored (.git/info/exclude) and travel with `carry`; together with
# the tree they must stay under the 64 MiB a call carries.
#
#   bench/device/prepare.sh            # then: device run, carry [".whl", ".devdata"]
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
CLOZE=.venv/bin/cloze
for ignored in .whl .devdata; do
    grep -qx "/$ignored/" .git/info/exclude 2>/dev/null || echo "/$ignored/" >>.git/info/exclude
done

# Beam's imports on the DirectRunner (checked by hiding every other module; cffi for its C
# module _cffi_backend, which cryptography loads) and the loader's.
NEEDED="apache-beam beartype cffi cryptography fastavro fasteners httplib2 jsonpickle objsize
orjson proto-plus pytz webdataset braceexpand zstandard sentencex rensa tokie"
rm -rf .whl && mkdir -p .whl
for name in $NEEDED; do
    version=$($PY -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "$name==$version" 2>&1 | grep -v '^WARNING' || true
done
$PY -m pip wheel -q --no-deps --no-build-isolation . -w .whl
rm -rf build/lib build/bdist* 2>/dev/null || true

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf .devdata && mkdir -p .devdata/bin
cp /usr/bin/time .devdata/bin/time
$PY -c "from pathlib import Path; from bench.scale.corpus import save_paragraphs as s; \
print(s(Path('.devdata/paragraphs.json.zst')), 'paragraphs')"
# 14 MB of text gives ~34,000 sequences of 128 (gpu.py reads 70 batches of 256); 5 MB
# gives ~3,000 of 512 (70 batches of 32).
for size in 14 5; do
    $PY -c "import sys; from pathlib import Path; from bench.scale.corpus import write_corpus; \
write_corpus(Path(sys.argv[1]), float(sys.argv[2]), seed=int(sys.argv[2]))" \
        "$work/raw$size/corpus.jsonl" "$size"
    $CLOZE clean --input "$work/raw$size" --output "$work/clean$size" --no-progress
    $CLOZE dedup --input "$work/clean$size" --output "$work/docs$size" --no-progress
done
$CLOZE vocab --input "$work/docs14" --output .devdata/tokenizer --kind wordpiece \
    --vocab-size 30522 --no-progress
$CLOZE shard --input "$work/docs14" --tokenizer .devdata/tokenizer --output .devdata/shards128 \
    --mode nsp --max-seq-len 128 --no-progress
$CLOZE shard --input "$work/docs5" --tokenizer .devdata/tokenizer --output .devdata/shards512 \
    --mode nsp --max-seq-len 512 --no-progress
du -sh .whl .devdata
total=$(( $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) + $(du -sb .whl .devdata | awk '{s+=$1} END {print s}') ))
echo "tree + carried: $((total / 1048576)) MiB of 64"
