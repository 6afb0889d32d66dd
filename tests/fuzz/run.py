"""Coverage-guided fuzzing of the project's readers with atheris (libFuzzer for Python).

    python -m tests.fuzz.run TARGET [libFuzzer flags]      # e.g. -runs=100000, -max_total_time=60
    python -m tests.fuzz.run --list

Starts from the target's valid seeds (tests.fuzz.targets) and mutates them, guided by
the coverage of our own modules (instrumented at import). A crash is any exception the
reader does not document; libFuzzer then writes the input to `crash-*` in the current
directory and exits non-zero. `-timeout` (a hang) and `-rss_limit_mb` / `-malloc_limit_mb`
(an unbounded allocation) count as crashes too; this script sets them unless given.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["clozeworks"]):
    from tests.fuzz.targets import TARGETS, check

# What counts as a hang and as an unbounded allocation, per input.
DEFAULTS = ["-timeout=20", "-rss_limit_mb=4096", "-malloc_limit_mb=1024"]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] == "--list":
        print("\n".join(TARGETS))
        return 0
    name, flags = argv[1], argv[2:]
    if name not in TARGETS:
        print(f"unknown target {name!r}; one of: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    target = TARGETS[name]
    seeds = Path(tempfile.mkdtemp(prefix=f"cloze-fuzz-seeds-{name}-"))
    for i, seed in enumerate(target.seeds()):
        (seeds / f"seed-{i}").write_bytes(seed)
        check(target, seed)  # a seed the reader refuses is a broken harness, not a finding
    given = {f.split("=", 1)[0] for f in flags}
    defaults = [d for d in DEFAULTS if d.split("=", 1)[0] not in given]
    atheris.Setup([argv[0], *defaults, *flags, str(seeds)], lambda data: check(target, data))
    atheris.Fuzz()  # exits the process: 0 when done, non-zero on a finding
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
