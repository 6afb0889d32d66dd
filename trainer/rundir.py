"""Whose run directory is this: a new run never writes into another run's directory.

Training into a directory that already held a run used to prune that run's newer
checkpoints as if they were its own and rewrite its config.json, and a later `--resume`
then mixed the two. A run directory is one with `config.json` (written first, before any
checkpoint); a new run takes an empty or absent directory, `--resume` takes a run
directory, and `--overwrite` replaces a run directory, never an arbitrary one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from clozeworks.corpus.locks import LOCK_FILE

CONFIG_FILE = "config.json"


def claim_problem(run: Path, resume: bool, overwrite: bool) -> str | None:
    """Why `run` cannot be used as asked, or None (after clearing it, with `overwrite`)."""
    if resume and overwrite:
        return "--resume continues a run and --overwrite replaces it; pass one of them"
    if run.exists() and not run.is_dir():
        return f"{run}: exists and is not a directory"
    is_run = (run / CONFIG_FILE).is_file()
    if resume:
        if not is_run:
            return f"{run}: no run to resume (no {CONFIG_FILE}); leave out --resume to start one"
        return None
    # The run's own lock file (taken before this is asked) is not something it holds.
    held = [p for p in run.iterdir() if p.name != LOCK_FILE] if run.exists() else []
    if not held:
        return None
    if not overwrite:
        what = "a run" if is_run else "files that are not a run"
        return (
            f"{run} already holds {what}; pass --resume to continue it or --overwrite to replace it"
        )
    if not is_run:
        return (
            f"{run}: --overwrite replaces a run directory (one with {CONFIG_FILE}), not other files"
        )
    for path in held:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return None
