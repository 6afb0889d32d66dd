"""Progress for people watching a terminal and for logs nobody watches live.

`progress_bar` is tqdm's bar when stderr is a terminal. Anywhere else (nohup, Slurm,
Kubernetes, a CI log) a bar is carriage returns in one endless line, and turning it off
left `cloze train` silent for hours; there it is a `LineProgress`, which prints a plain
line every `CLOZEWORKS_LOG_EVERY` seconds (default 30): what is done, the rate, the
share of the total and the time left when the total is known, and the last postfix
(train's loss). Both take the same calls: `update(n)`, `set_postfix(**values)`, `close()`.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

LOG_EVERY_ENV = "CLOZEWORKS_LOG_EVERY"
DEFAULT_LOG_EVERY_S = 30.0


def log_every() -> float:
    """Seconds between progress lines without a terminal."""
    try:
        return max(0.0, float(os.environ.get(LOG_EVERY_ENV, DEFAULT_LOG_EVERY_S)))
    except ValueError:
        return DEFAULT_LOG_EVERY_S


def progress_bar(
    total: float | None,
    desc: str,
    unit: str = "it",
    enabled: bool = True,
    initial: int = 0,
    stream: IO[str] | None = None,
    **bar_options: Any,
) -> Any:
    """A tqdm bar on a terminal, a `LineProgress` elsewhere; a silent bar if not `enabled`.
    `bar_options` go to tqdm only (position, leave, ...)."""
    from tqdm import tqdm

    out = stream if stream is not None else sys.stderr
    if enabled and not _is_terminal(out):
        return LineProgress(total, desc, unit, initial, out)
    return tqdm(
        total=total,
        desc=desc,
        unit="B" if unit == "bytes" else unit,
        unit_scale=unit == "bytes",
        unit_divisor=1024 if unit == "bytes" else 1000,
        initial=initial,
        disable=not enabled,
        file=out,
        **bar_options,
    )


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class LineProgress:
    """tqdm's calls, printed as one plain line at a fixed interval and a last one at the end."""

    def __init__(
        self, total: float | None, desc: str, unit: str, initial: int, stream: IO[str]
    ) -> None:
        self.total = total
        self.desc = desc
        self.unit = unit
        self.n: float = initial
        self.stream = stream
        self.every = log_every()
        self.postfix: dict[str, Any] = {}
        self._start = self._last = time.monotonic()
        self._initial = initial
        self._closed = False
        self._printed = False

    def update(self, n: float = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._print(now)

    def set_postfix(self, **values: Any) -> None:
        self.postfix.update(values)

    def close(self) -> None:
        """A last line, if the log has had one: a run shorter than the interval is said by
        its command's own summary alone."""
        if not self._closed:
            self._closed = True
            if self._printed:
                self._print(time.monotonic())

    def line(self, now: float) -> str:
        elapsed = max(now - self._start, 1e-9)
        rate = (self.n - self._initial) / elapsed
        parts = [f"{self.desc}: {_amount(self.n, self.unit)}"]
        if self.total:
            parts[0] += f" of {_amount(self.total, self.unit)} ({100 * self.n / self.total:.1f}%)"
        parts.append(f"{_amount(rate, self.unit)}/s")
        if self.total and rate > 0 and self.n < self.total:
            parts.append(f"ETA {_duration((self.total - self.n) / rate)}")
        parts.append(f"elapsed {_duration(elapsed)}")
        parts += [f"{k} {v}" for k, v in self.postfix.items()]
        return ", ".join(parts)

    def _print(self, now: float) -> None:
        self._printed = True
        # One write with its newline: print() writes the line and "\n" apart, and a Ctrl-C
        # (or the main thread's error line) landing between them joined two lines in one.
        self.stream.write(self.line(now) + "\n")
        self.stream.flush()


def _amount(value: float, unit: str) -> str:
    if unit == "bytes":
        for scale, name in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
            if value >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B"
    shown = f"{value:,.0f}" if value >= 100 or float(value).is_integer() else f"{value:.2f}"
    return f"{shown} {unit}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
