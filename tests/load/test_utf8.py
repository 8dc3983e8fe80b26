"""Where a file stops being UTF-8: the same line and column whether it is read whole or as a stream."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from toporender.errors import UserError
from toporender.load import yaml_source
from toporender.load.yaml_source import first_invalid_utf8, read_text

CASES = [
    (b"a: 1\nb: 2\n", None),
    (b"\xff", (1, 1)),
    (b"a: caf\xe9\n", (1, 7)),
    (b"a: 1\nb: \xe2\x82\xac ok\nc: \xc3\x28\n", (3, 4)),
    (b"a: \xe2\x82", (1, 4)),  # cut short at the end
    (b"x" * 10 + b"\n" + b"\xf0\x9f\x98\x80" * 5 + b"\n\n\xc0\xaf", (4, 1)),
    (b"\xef\xbb\xbfa: 1\n", None),
]


@pytest.mark.parametrize("block", [1, 2, 3, 5, 4 * 1024 * 1024])
@pytest.mark.parametrize(("raw", "where"), CASES)
def test_a_stream_finds_the_place_read_text_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  raw: bytes, where: tuple[int, int] | None, block: int) -> None:
    monkeypatch.setattr(yaml_source, "_UTF8_BLOCK", block)  # characters cut across every block boundary
    assert first_invalid_utf8(io.BytesIO(raw)) == where
    path = tmp_path / "f.yaml"
    path.write_bytes(raw)
    if where is None:
        read_text(path, "f.yaml")
        return
    with pytest.raises(UserError) as err:
        read_text(path, "f.yaml")
    assert str(err.value.diagnostics[0]) == f"f.yaml:{where[0]}:{where[1]}: file is not valid UTF-8; save it as UTF-8"
