"""The corpus stages need no PyTorch (an extra: Beam workers on Dataflow skip it); the
verbs that do say how to install it in one line."""

import subprocess
import sys

BLOCK = "import sys; sys.modules['torch'] = None\n"  # `import torch` now fails as if absent


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=300
    )


def test_clean_runs_and_train_says_what_to_install(tmp_path) -> None:
    raw = tmp_path / "in.jsonl"
    raw.write_text('{"text": "a short document of a few words"}\n')
    clean = ["clean", "--input", str(raw), "--output", str(tmp_path / "o")]
    code = (
        "from clozeworks.cli import main\n"
        f"assert main({clean!r}) == 0\n"
        "sys.exit(main(['train', '--data', 'd', '--output', 'o']))\n"
    )
    done = _run(code)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().endswith(
        "cloze train: error: needs PyTorch, which is not installed: pip install 'clozeworks[train]'"
    )
    helped = _run("from clozeworks.cli import main\nsys.exit(main(['--help']))\n")
    assert helped.returncode == 0 and "(needs PyTorch" in helped.stdout


def test_the_wheel_does_not_require_torch() -> None:
    from importlib.metadata import requires

    base = [r for r in requires("clozeworks") or [] if "extra ==" not in r]
    assert not [r for r in base if r.startswith("torch")], base
    assert any(r.startswith("torch") and 'extra == "train"' in r for r in requires("clozeworks"))
