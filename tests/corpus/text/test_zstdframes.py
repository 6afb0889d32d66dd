import io

import pytest
import zstandard

from clozeworks.corpus.text.readers import decompressing
from clozeworks.schemas.errors import BadInputError

PAYLOAD = b"".join(b"line %d of a test file with some words\n" % i for i in range(4000))


def _frames(**params) -> bytes:
    # Two frames, the second written by the streaming compressor (several blocks).
    out = io.BytesIO()
    out.write(zstandard.ZstdCompressor(**params).compress(PAYLOAD))
    with zstandard.ZstdCompressor(**params).stream_writer(out, closefd=False) as w:
        for start in range(0, len(PAYLOAD), 30_000):
            w.write(PAYLOAD[start : start + 30_000])
            w.flush(zstandard.FLUSH_BLOCK)
    return out.getvalue()


def _read(data: bytes) -> bytes:
    return decompressing(io.BytesIO(data), "x.zst").read()


@pytest.mark.parametrize(
    "params",
    [{}, {"write_checksum": True}, {"write_content_size": False}, {"write_dict_id": False}],
)
def test_whole_files_read_and_every_cut_inside_a_frame_raises(params) -> None:
    data = _frames(**params)
    assert _read(data) == PAYLOAD * 2
    first = len(zstandard.ZstdCompressor(**params).compress(PAYLOAD))
    # Every cut except the one between the frames (where the file is a whole, shorter file).
    cuts = sorted({*range(1, 40), *range(1, len(data), 97), first - 1, first + 1, len(data) - 1})
    for cut in cuts:
        with pytest.raises(EOFError):
            _read(data[:cut])
    assert _read(data[:first]) == PAYLOAD


def test_skippable_frames_are_whole_and_an_empty_file_is_an_error() -> None:
    skippable = (0x184D2A5E).to_bytes(4, "little") + (6).to_bytes(4, "little") + b"ignore"
    data = skippable + _frames() + skippable
    assert _read(data) == PAYLOAD * 2
    # zero bytes is not an empty .zst (that has a frame header): a failed download (issue 33)
    with pytest.raises(BadInputError, match=r"x\.zst: empty compressed file"):
        _read(b"")
    with pytest.raises(EOFError):
        _read(skippable[:-1])


def test_garbage_is_an_error_not_an_empty_file() -> None:
    with pytest.raises((EOFError, zstandard.ZstdError)):
        _read(b"this is not zstd at all")
