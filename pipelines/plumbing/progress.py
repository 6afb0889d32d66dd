"""Progress of a pipeline running on this machine: bars on a terminal, lines in a log.

DoFns count what they have done (input bytes read, documents read and written,
sequences written) with a `Tally`, which saves its counts at most twice a second to a
small JSON file of its own under the directory named by the CLOZEWORKS_PROGRESS
environment variable. The command's process sets that variable for the run (worker
processes inherit it), sums the files twice a second and draws one bar per count.

Beam's own counters cannot do this: on the local runners they are only read back when
the pipeline has finished. Where the variable is unset (a remote runner, or no progress
wanted) a Tally does nothing; Dataflow shows its own progress.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from clozeworks.corpus.progress import progress_bar

ENV = "CLOZEWORKS_PROGRESS"
SAVE_EVERY_S = 0.5


class Tally:
    """Counts by name for one DoFn instance, saved to its own file now and then. Create
    it in `setup` or `start_bundle` (it is not pickled with the DoFn), `save` it in
    `finish_bundle` so that the last counts are seen."""

    def __init__(self) -> None:
        directory = os.environ.get(ENV)
        self.path = os.path.join(directory, f"{uuid.uuid4().hex}.json") if directory else None
        self.counts: dict[str, int] = {}
        self._saved = time.monotonic()

    def add(self, name: str, n: int = 1) -> None:
        if self.path is None:
            return
        self.counts[name] = self.counts.get(name, 0) + n
        if time.monotonic() - self._saved >= SAVE_EVERY_S:
            self.save()

    def save(self) -> None:
        if self.path is None or not self.counts:
            return
        temporary = f"{self.path}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(self.counts, f)
            os.replace(temporary, self.path)
        except OSError:  # the run is over and the directory gone: nobody is looking
            self.path = None
        self._saved = time.monotonic()


def read_totals(directory: str) -> dict[str, int]:
    """The counts of every Tally under `directory`, summed by name."""
    totals: dict[str, int] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            if not entry.name.endswith(".json"):
                continue
            try:
                with open(entry.path, encoding="utf-8") as f:
                    counts = json.load(f)
            except (OSError, ValueError):  # replaced while we read it: next time
                continue
            for name, value in counts.items():
                totals[name] = totals.get(name, 0) + int(value)
    return totals


@dataclass(frozen=True)
class Bar:
    """One bar: the Tally count `name`, labelled, against `total` where it is known."""

    name: str
    label: str
    total: int | None = None
    unit: str = "docs"


@contextlib.contextmanager
def pipeline_progress(
    bars: Sequence[Bar], enabled: bool, stream: IO[str] | None = None
) -> Iterator[None]:
    """Draw `bars` while the body runs a pipeline on this machine; nothing if not
    `enabled`. Leaves the environment and no files behind."""
    if not enabled or not bars:
        yield
        return
    directory = tempfile.mkdtemp(prefix="cloze-progress-")
    previous = os.environ.get(ENV)
    os.environ[ENV] = directory
    # Bars on a terminal; plain lines at an interval elsewhere (corpus.progress).
    drawn = [
        progress_bar(
            bar.total,
            bar.label,
            bar.unit,
            stream=stream,
            position=i,
            leave=True,
            dynamic_ncols=True,
            mininterval=SAVE_EVERY_S,
        )
        for i, bar in enumerate(bars)
    ]
    done = threading.Event()

    def draw() -> None:
        totals = read_totals(directory)
        for bar, line in zip(bars, drawn, strict=True):
            value = totals.get(bar.name, 0)
            if value != line.n:
                line.update(value - line.n)

    def watch() -> None:
        while not done.wait(SAVE_EVERY_S):
            draw()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
        draw()  # the counts every Tally saved at the end of its bundles
    finally:
        done.set()
        watcher.join()
        for line in drawn:
            line.close()
        _restore(previous)
        shutil.rmtree(directory, ignore_errors=True)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = previous
