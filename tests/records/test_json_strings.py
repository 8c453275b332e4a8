"""Raw JSON strings to UTF-8 in numpy (:mod:`consumer.sources.records.json_strings`) against ``json.loads``: simple
escapes, ``\\u`` escapes with surrogate pairs, escaped slashes, runs of backslashes, control characters, non-ASCII
text both raw and escaped; and a table of strings it must refuse (the scanner then names the record)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.sources.records.json_strings import strings_to_utf8

CHARS = st.sampled_from(["a", " ", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", '"', "\\", "/", "u", "\\u", "\u00e9",
                         "\u07ff", "\u0800", "\u4e2d", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff", "\u2028"])


def _buffer(raws: list[bytes], writable: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lens = np.array([len(r) for r in raws], dtype=np.int64)
    starts = np.zeros(lens.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    joined = bytearray(b"".join(raws)) if writable else b"".join(raws)
    return np.frombuffer(joined, dtype=np.uint8), starts, starts + lens


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(CHARS, max_size=12).map("".join), st.booleans(), st.booleans()), max_size=8),
       st.booleans())
def test_texts_match_json_loads(items, writable):
    raws = []
    for text, ascii_only, slash in items:
        raw = json.dumps(text, ensure_ascii=ascii_only).encode()
        raws.append(raw.replace(b"/", b"\\/") if slash else raw)  # "\/" is an escape json.dumps never writes
    buf, starts, ends = _buffer(raws, writable)
    got = strings_to_utf8(buf, starts, ends)
    assert got is not None
    data, offset, length = got
    assert [data[o:o + n].tobytes() for o, n in zip(offset.tolist(), length.tolist())] == \
        [json.loads(r).encode() for r in raws]


REFUSED = [
    (b'"\\ud800"', "a lone high surrogate escape"),
    (b'"\\udc00"', "a lone low surrogate escape"),
    (b'"\\ud83d\\ud83d"', "a high surrogate followed by another high"),
    (b'"\\ud83dx\\ude00"', "a high and a low surrogate apart"),
    (b'5', "a number where a string was wanted"),
    (b'null', "null where a string was wanted"),
    (b'"a\xffb"', "a byte that never starts UTF-8"),
    (b'"\xed\xa0\x80"', "a surrogate encoded as UTF-8"),
    (b'"\xc3"', "a UTF-8 sequence cut short by the closing quote"),
]


@pytest.mark.parametrize("raw, why", REFUSED)
def test_refused_strings(raw, why):
    buf, starts, ends = _buffer([b'"ok"', raw, b'"\\n"'], writable=True)
    assert strings_to_utf8(buf, starts, ends) is None, why


def test_no_escape_is_not_copied():
    buf, starts, ends = _buffer([b'"ab"', b'"\xc3\xa9"', b'""'], writable=False)
    data, offset, length = strings_to_utf8(buf, starts, ends)
    assert data is buf
    assert (offset.tolist(), length.tolist()) == ([1, 5, 9], [2, 2, 0])
