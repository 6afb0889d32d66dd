"""The output lock on local disk: a second holder is refused naming the first, a lock
left by a dead process is taken over with a message, a release never removes a later
run's lock. Whole verbs racing in real processes are tests/test_output_locks.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clozeworks.corpus.locks import LOCK_FILE, OutputInUse, OutputLock, read_holder
from clozeworks.corpus.outputs import LOCAL

HOLD = "from clozeworks.corpus.locks import OutputLock;from clozeworks.corpus.outputs import LOCAL;import sys,time;lock=OutputLock(LOCAL,sys.argv[1],'shard');lock.acquire();print('held',flush=True);time.sleep(600)"  # noqa: E501


def test_a_second_lock_is_refused_naming_the_first(tmp_path) -> None:
    out = str(tmp_path / "out")
    with OutputLock(LOCAL, out, "clean") as first:
        held = json.loads((tmp_path / "out" / LOCK_FILE).read_text())
        assert held["pid"] == os.getpid() and held["verb"] == "clean"
        with pytest.raises(OutputInUse) as err:
            OutputLock(LOCAL, out, "shard").acquire()
        said = str(err.value)
        assert "in use by `cloze clean`" in said and f"PID {os.getpid()}" in said
        assert read_holder(LOCAL, out) == first.holder
    assert not (tmp_path / "out" / LOCK_FILE).exists()  # released: no file left
    assert read_holder(LOCAL, out) is None
    OutputLock(LOCAL, out, "shard").acquire()  # free again


def test_a_lock_of_another_live_process_is_refused(tmp_path) -> None:
    out = str(tmp_path / "out")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, out], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputInUse, match=f"`cloze shard` \\(PID {holder.pid} on "):
            OutputLock(LOCAL, out, "clean").acquire()
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_process_lock_is_taken_over_with_a_message(tmp_path, capsys) -> None:
    out = str(tmp_path / "out")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, out], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # kill -9: no cleanup runs, the lock file stays
    holder.wait()
    assert (tmp_path / "out" / LOCK_FILE).exists()
    assert read_holder(LOCAL, out) is None  # nobody holds it
    with OutputLock(LOCAL, out, "clean") as lock:
        err = capsys.readouterr().err
        assert f"taking over the lock of `cloze shard` (PID {holder.pid}" in err
        assert "no longer running" in err
        assert read_holder(LOCAL, out) == lock.holder


def test_a_release_leaves_a_later_runs_lock_alone(tmp_path) -> None:
    """A verb that swaps a new directory in for its output took its lock file away; the
    lock file now at the path is a later run's and must survive the first run's release."""
    out = tmp_path / "out"
    first = OutputLock(LOCAL, str(out), "vocab")
    first.acquire()
    os.replace(out, tmp_path / "old")
    out.mkdir()
    second = OutputLock(LOCAL, str(out), "vocab")
    second.acquire()
    first.release()
    assert (out / LOCK_FILE).exists()
    with pytest.raises(OutputInUse):
        OutputLock(LOCAL, str(out), "vocab").acquire()
    second.release()


def test_a_lock_beside_the_output(tmp_path) -> None:
    out = str(tmp_path / "model")
    with OutputLock(LOCAL, out, "export", beside=True):
        assert (tmp_path / ".model.cloze.lock").is_file()
        assert not (tmp_path / "model").exists()
        with pytest.raises(OutputInUse, match="model: in use by `cloze export`"):
            OutputLock(LOCAL, out, "finetune", beside=True).acquire()
    assert not (tmp_path / ".model.cloze.lock").exists()


def test_a_damaged_lock_file_of_a_dead_run_is_taken_over(tmp_path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / LOCK_FILE).write_bytes(b"\x00garbage{")
    with OutputLock(LOCAL, str(tmp_path / "out"), "clean"):
        pass
    assert capsys.readouterr().err == ""  # nothing named, nothing to say
