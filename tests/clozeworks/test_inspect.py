"""`cloze inspect` end to end: exit codes, one JSON document, the HTML report."""

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clozeworks.cli import main
from tests.trainer.test_runinfo import make_run

SHARD_KEYS = {
    "kind",
    "path",
    "format_version",
    "mode",
    "max_seq_len",
    "block_size",
    "token_dtype",
    "vocab_kind",
    "vocab_size",
    "premask",
    "dupe_factor",
    "shards",
    "blocks",
    "sequences",
    "tokens",
    "bytes",
    "bytes_per_token",
    "verified",
    "read",
    "sequence_length",
    "padding",
    "token_stats",
    "pairs",
    "premasked",
    "per_shard",
    "build_stats",
    "encoded_by",
    "problems",
    "warnings",
}


def test_json_is_one_document_with_the_documented_keys(premasked_pairs, capsys) -> None:
    assert main(["inspect", str(premasked_pairs), "--json", "--batch-size", "8", "--top", "5"]) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)  # the whole of stdout is one JSON document
    assert set(summary) == SHARD_KEYS
    assert summary["padding"]["batch_size"] == 8 and len(summary["token_stats"]["top"]) == 5
    assert summary["premasked"]["counts"]["mask"] > 0
    assert set(summary["pairs"]["labels"]) == {"is_next", "not_next"}


def test_terminal_summary_and_show(premasked_pairs, capsys) -> None:
    assert main(["inspect", str(premasked_pairs), "--verify", "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert "verified: every checksum and block is intact" in out
    assert re.search(r"labels +is_next \d+\.\d%  not_next \d+\.\d%", out)
    assert re.search(r"masked +1\d\.\d\d% of [\d,]+ maskable tokens; mask [78]\d\.\d%", out)
    assert out.count("    A: [CLS]") == 2 and out.count("    B: ") == 2
    assert "predict: @" in out and "[MASK]->" in out


def test_verify_exit_codes(premasked_pairs, tmp_path, capsys) -> None:
    import shutil

    copy = tmp_path / "s"
    shutil.copytree(premasked_pairs, copy)
    shard = sorted(copy.glob("shard-*.tar"))[1]
    shard.write_bytes(shard.read_bytes()[:-4096])
    assert main(["inspect", str(copy), "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"BAD {shard.name}: size" in out
    assert main(["inspect", str(copy), "--verify", "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [p["shard"] for p in problems] == [shard.name]


def pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def self_contained(html: str) -> bool:
    return not re.search(r"<script|<link|src=\"(?!data:)|url\(", html)


def _run_with_a_resume(tmp_path: Path) -> Path:
    records = [
        {
            "step": s,
            "mlm_loss": 5.0 - s / 10,
            "mlm_accuracy": s / 50,
            "lr": s / 1e4,
            "grad_norm": 1.0,
            "tokens_per_s": 900.0,
        }
        for s in range(1, 11)
    ]
    records += [{"step": 10, "split": "eval", "mlm_loss": 4.5}]
    run = make_run(tmp_path / "run", records)
    (run / "resumes.json").write_text("[5]")
    return run


def test_html_reports_for_every_kind(premasked_pairs, small_build, tmp_path, capsys) -> None:
    paths, _ = small_build
    run = _run_with_a_resume(tmp_path)
    # kind -> plots: shards (lengths, segments, predictions, rank-frequency), docs
    # (lengths), tokenizer (none), run (loss, train against held-out loss, held-out loss,
    # accuracy, lr, grad norm, speed).
    cases = [(premasked_pairs, 4), (Path(paths.docs), 1), (Path(paths.tokenizer), 0), (run, 7)]
    for i, (path, plots) in enumerate(cases):
        report = tmp_path / f"report{i}.html"
        assert main(["inspect", str(path), "--html", str(report)]) == 0
        assert f"report: {report}" in capsys.readouterr().out
        html = report.read_text(encoding="utf-8")
        assert html.startswith("<!DOCTYPE html>") and self_contained(html)
        images = pngs(html)
        assert len(images) == plots
        assert all(img.startswith(b"\x89PNG\r\n\x1a\n") and len(img) > 2000 for img in images)
        assert "no problems found" in html and "<pre>" not in html.split("<h2>Everything")[0][:200]
    shards, docs, _, run_html = (
        (tmp_path / f"report{i}.html").read_text(encoding="utf-8") for i in range(4)
    )
    # The static masks' split beside BERT's, the sentence labels, every shard.
    assert re.search(r"<td>mask</td><td class=\"n\">[\d,]+</td><td>.*?%</td><td>80\.00%", shards)
    assert "is_next" in shards and "shard-000000.tar" in shards
    # The funnel from clean's input, the sources, sample documents.
    assert "<td>clean</td><td>documents in</td>" in docs and "Sample documents" in docs
    assert "docstrings.jsonl.gz" in docs
    # Sources by directory first (a corpus of thousands of files reads by its parts).
    assert "<th>directory</th><th>files</th><th>documents</th>" in docs
    assert re.search(r"<td>raw</td><td class=\"n\">1</td><td class=\"n\">[\d,]+</td>", docs)
    # Resumes are marked, held-out curves and the configuration are there.
    assert 'resumed at</th><td class="n">5</td>' in run_html
    assert "dashed: resumed from a checkpoint" in run_html and "eval/mlm_loss" in run_html
    assert "<td>model.hidden_size</td><td>128</td>" in run_html
    # Training and held-out loss on one axis; held-out loss and accuracy never share one.
    assert "Training and held-out loss: held-out mlm_loss, train mlm_loss" in run_html
    assert "Held-out loss: eval/mlm_loss" in run_html


@pytest.mark.skipif(
    shutil.which("chromium") is None, reason="needs chromium (apt install chromium)"
)
def test_html_reports_render_in_a_headless_browser(premasked_pairs, small_build, tmp_path) -> None:
    Image = pytest.importorskip("PIL.Image")  # comes with matplotlib, the report's extra
    paths, _ = small_build
    for i, path in enumerate((premasked_pairs, Path(paths.docs), _run_with_a_resume(tmp_path))):
        report = tmp_path / f"r{i}.html"
        shot = tmp_path / f"r{i}.png"
        assert main(["inspect", str(path), "--html", str(report)]) == 0
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1300,2400",
                f"--screenshot={shot}",
                report.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
        with Image.open(shot) as image:
            assert image.size == (1300, 2400)
            pixels = image.convert("RGB")
        # A page of tables and plots, not a blank or an error page: ink on more than 3%
        # of it (the demo's reports: 5-12%) in hundreds of colours (plots, antialiasing).
        colours = pixels.getcolors(maxcolors=1 << 20) or []
        ink = sum(n for n, rgb in colours if sum(rgb) < 720)
        assert ink > 0.03 * 1300 * 2400 and len(colours) > 300, (ink, len(colours))


def test_html_without_matplotlib_says_how_to_get_it(premasked_pairs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    report = tmp_path / "r.html"
    assert main(["inspect", str(premasked_pairs), "--html", str(report)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'clozeworks[report]'" in err[0]
    assert not report.exists()


def test_shard_only_flags_on_other_kinds_are_usage_errors(small_build, capsys) -> None:
    paths, _ = small_build
    assert main(["inspect", paths.docs, "--verify"]) == 2
    assert "apply to shard sets" in capsys.readouterr().err
    assert main(["inspect", paths.docs, "--batch-size", "0"]) == 2
