"""An output on a bucket copied to this machine for a verb that reads local files
(`inspect`, `export`): a run as `--resume` fetches it (its files and one committed step),
anything else whole, into a temporary folder removed at exit."""

from __future__ import annotations

from pathlib import Path

from clozeworks.schemas.errors import BadInputError


def fetched(url: str, step: int | None = None) -> Path:
    """`url`'s output in a temporary folder; of a run, committed `step` (default: the
    newest). BadInputError, naming `url`, if nothing is there or it cannot be read."""
    import atexit
    import shutil
    import tempfile

    import fsspec

    from clozeworks.corpus.locks import LOCK_FILE
    from clozeworks.trainer.bucket_run import CONFIG, BucketRun

    where = Path(tempfile.mkdtemp(prefix="cloze-fetch-"))
    atexit.register(shutil.rmtree, where, True)
    local = where / url.rstrip("/").rsplit("/", 1)[-1]
    try:
        fs, root = fsspec.core.url_to_fs(url.rstrip("/"))
        files = [p for p in fs.find(root) if not p.endswith(f"/{LOCK_FILE}")]
        if not files:
            raise BadInputError(f"{url}: nothing there")
        names = {p[len(root) :].lstrip("/") for p in files}
        if {CONFIG, "metrics.jsonl"} <= names:  # a run: one step is enough
            return BucketRun(url, local).fetch(step)
        for path in files:
            target = local / path[len(root) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(path, str(target))
    except (ImportError, ValueError, OSError) as err:
        raise BadInputError(f"{url}: cannot read it: {err}") from None
    return local
