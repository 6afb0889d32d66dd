"""Files a run reads back are refused on their size before they are read."""

import os

import pytest

from clozeworks.cli import main
from clozeworks.schemas.errors import BadInputError
from clozeworks.schemas.validate import read_bounded, read_json_object


def test_a_file_past_its_ceiling_is_one_error_naming_it(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{" + " " * 200 + "}")
    assert read_bounded(path, 202, "JSON file") == path.read_bytes()
    with pytest.raises(BadInputError, match=r"config\.json: 202 bytes, past the 201 a JSON"):
        read_bounded(path, 201, "JSON file")


def test_a_fifo_is_bounded_too(tmp_path) -> None:
    # A FIFO reports size 0: the read itself stops one byte past the ceiling.
    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:  # the writer: more than the ceiling, then gone
        try:
            with open(fifo, "wb") as f:
                f.write(b"x" * 4096)
        finally:
            os._exit(0)
    try:
        with pytest.raises(BadInputError, match="more than 1,000 bytes, past the 1,000 a"):
            read_bounded(fifo, 1000, "manifest")
    finally:
        os.waitpid(pid, 0)


def test_read_json_object_applies_the_json_ceiling(tmp_path, monkeypatch) -> None:
    import clozeworks.schemas.validate as validate

    path = tmp_path / "config.json"
    path.write_text('{"a": "' + "x" * 100 + '"}')
    monkeypatch.setattr(validate, "MAX_JSON_BYTES", 50)
    with pytest.raises(BadInputError, match="past the 50 a JSON file"):
        read_json_object(path)


def test_an_oversized_tokenizer_is_one_line_for_shard(tmp_path, capsys, monkeypatch) -> None:
    import clozeworks.corpus.vocab.files as files

    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{" + " " * 100 + "}")
    monkeypatch.setattr(files, "MAX_TOKENIZER_BYTES", 64)
    docs = tmp_path / "docs"
    docs.mkdir()
    out = str(tmp_path / "out")
    code = main(["shard", "--input", str(docs), "--tokenizer", str(tok), "--output", out])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "tokenizer.json: 102 bytes, past the 64 a tokenizer file" in err, err
