from collections import Counter

from clozeworks.corpus.text.probe import PACKAGES, package_docstrings, write_package_task
from clozeworks.trainer.finetune.readers import read_examples
from clozeworks.trainer.finetune.tasks import load_task


def test_package_task_is_balanced_held_out_and_readable(tmp_path) -> None:
    train, dev = write_package_task(tmp_path, seed=3, train_per_class=10, dev_per_class=30)
    assert (train, dev) == (40, 120)
    spec = load_task(str(tmp_path / "task.toml"))
    assert spec.labels == PACKAGES
    rows = {split: read_examples(spec, tmp_path, split).items for split in ("train", "dev")}
    assert Counter(e.label for e in rows["train"]) == {0.0: 10, 1.0: 10, 2.0: 10, 3.0: 10}
    assert Counter(e.label for e in rows["dev"]) == {0.0: 30, 1.0: 30, 2.0: 30, 3.0: 30}
    assert not {e.text_a for e in rows["train"]} & {e.text_a for e in rows["dev"]}
    texts = package_docstrings()
    assert all(e.text_a in texts[PACKAGES[int(e.label)]] for e in rows["dev"])
    # The same seed writes the same files.
    again = tmp_path / "again"
    write_package_task(again, seed=3, train_per_class=10, dev_per_class=30)
    assert (again / "dev.tsv").read_bytes() == (tmp_path / "dev.tsv").read_bytes()
