"""The JSONL scanner against a line-by-line reference (``json.loads`` per line) on generated containers: blank and
whitespace-only lines anywhere (first, last, in runs, a whole chunk of them), records with leading whitespace and
CRLF, escapes and non-ASCII text, bad records skipped, chunk boundaries anywhere. Texts (their lengths from the
scan, their bytes decoded again from the records' lines, as a read does), record numbers, the records' lines and
the blank / skipped counts must be the reference's, in both the one-call-per-chunk path and
the line-by-line one, with the chunks decoded on one thread or on several, by Arrow's reader or (Arrow's tier
refusing every chunk) by msgspec. A table of lines where Arrow's rules differ from JSON's gives the reference's
answer too."""

from __future__ import annotations

import contextlib
import json
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError
from consumer.sources.records import RecordOptions
from consumer.sources.records.container import Container
from consumer.sources.records.jsonl import scan_jsonl
from consumer.sources.records.jsonl_arrow import ArrowLines
from consumer.sources.records.jsonl_read import LineTexts
from consumer.sources.records.scanned import DecodeSink

TEXT = st.text(st.sampled_from(["a", "b", " ", "\n", '"', "\\", "\t", "\u00e9", "\u4e2d", "\U0001f600", "\u2028",
                                "\r"]), max_size=12)
RECORD = st.builds(lambda t, ascii_only, lead, crlf: lead + json.dumps({"id": 1, "text": t}, ensure_ascii=ascii_only)
                   + ("\r" if crlf else ""), TEXT, st.booleans(), st.sampled_from(["", " ", "\t", "\r "]),
                   st.booleans())
LINE = st.one_of(RECORD, RECORD, RECORD, st.sampled_from(["", " ", "\t", "\r", " \t\r ", "not json", "[1]",
                                                           '{"text": 2}', '{"x": "a"}']))


def _reference(lines: list[str]) -> tuple[list[bytes], list[int], list[int], int, int]:
    texts, records, starts, blank, skipped, at = [], [], [], 0, 0, 0
    for k, line in enumerate(lines):
        raw = line.encode()
        if not raw.strip(b" \t\r"):
            blank += 1
        else:
            try:
                obj = json.loads(raw)
                ok = isinstance(obj, dict) and isinstance(obj.get("text"), str)
            except ValueError:
                ok = False
            if ok:
                texts.append(obj["text"].encode())
                records.append(k)
                starts.append(at)
            else:
                skipped += 1
        at += len(raw) + 1
    return texts, records, starts, blank, skipped


def _read_back(got, data: bytes) -> list[bytes]:
    """The texts of a plain container's scan as a read gives them: decoded again from the records' lines, each of
    the length the scan indexed."""
    blob, at, n = LineTexts(RecordOptions("jsonl"))([data[o:o + k] for o, k in zip(got.json_offset.tolist(),
                                                                                     got.json_length.tolist())])
    assert n.tolist() == got.length.tolist()
    return [blob[o:o + k].tobytes() for o, k in zip(at.tolist(), n.tolist())]


@settings(max_examples=150, deadline=None)
@given(st.lists(LINE, max_size=40), st.booleans(), st.lists(st.integers(0, 1 << 16), max_size=8),
       st.sampled_from([1, 1, 3]), st.booleans())
def test_scanner_matches_line_by_line_reference(lines, final_newline, cuts, threads, arrow):
    data = "\n".join(lines).encode() + (b"\n" if final_newline and lines else b"")
    bounds = sorted({c % (len(data) + 1) for c in cuts})  # the container's chunks end anywhere
    pieces = [data[a:b] for a, b in zip([0, *bounds], [*bounds, len(data)]) if b > a]
    container = Container("mem.jsonl", len(data), lambda: iter(pieces), lambda: None)
    sink = DecodeSink()
    with contextlib.nullcontext() if arrow else patch.object(ArrowLines, "texts", lambda *_: None):  # msgspec tier
        got = scan_jsonl(container, RecordOptions("jsonl", on_bad_record="skip"), sink, threads=threads)
    if lines and not final_newline and lines[-1] == "":
        lines = lines[:-1]  # nothing after the last newline: no line there
    texts, records, starts, blank, skipped = _reference(lines)
    assert got.from_lines and sink.size == 0  # a plain container: texts decoded from their lines when read
    assert _read_back(got, data) == texts
    assert got.record.tolist() == records
    assert got.json_offset.tolist() == starts
    assert [data[o:o + n] for o, n in zip(got.json_offset.tolist(), got.json_length.tolist())] == \
        [lines[r].encode() for r in records]
    assert (got.counts["blank_lines"], got.counts["skipped_records"]) == (blank, skipped)


def test_threads_name_the_first_bad_record_in_order():
    pieces = [b'{"text": "a"}\n' * 50, b'{"text": "b"}\n{"text": 1}\n', b'{"text": "c"}\n' * 50, b"not json\n"]
    data = b"".join(pieces)
    container = Container("mem.jsonl", len(data), lambda: iter(pieces), lambda: None)
    with pytest.raises(FormatError, match=r"line 52 at byte 714: invalid JSON record \(Expected `str`, got `int`"):
        scan_jsonl(container, RecordOptions("jsonl"), DecodeSink(), threads=3)


ARROW_DIFFERS = [  # (line, its text or None: a bad record)
    (b'{"text": "x"} {"text": "y"}', None),  # two objects on one line: Arrow reads two rows
    (b'{"text": "x"},{"text": "y"}', None),  # and with a comma: msgspec's joined array would read two records
    (b'\xef\xbb\xbf{"text": "bom"}', None),  # Arrow passes over a byte order mark; it is not JSON
    (b'{"text": "a", "text": "b"}', b"b"),  # a field twice: Arrow refuses it, the last one counts
    (b'{"text": "big", "n": 1e999}', b"big"),  # a number too big for a double elsewhere in the object
    (b'{"text": "\\ud83d\\ude00 pair"}', "\U0001f600 pair".encode()),  # a surrogate pair
    (b'{"text": "bad \xff byte"}', None),  # not UTF-8: Arrow's reader does not check it
    (b'{"text": null}', None),
    (b'{"other": 1}', None),
    (b' \t{"text": "lead"}', b"lead"),  # leading whitespace
]


@pytest.mark.parametrize("line, text", ARROW_DIFFERS)
def test_lines_where_arrow_differs_get_the_scanners_answer(line, text):
    good = b'{"text": "ok"}'
    data = b"\n".join([good, line, good]) + b"\n"
    container = Container("mem.jsonl", len(data), lambda: iter([data]), lambda: None)
    sink = DecodeSink()
    got = scan_jsonl(container, RecordOptions("jsonl", on_bad_record="skip"), sink)
    texts = _read_back(got, data)
    if text is None:
        assert (texts, got.record.tolist(), got.counts["skipped_records"]) == ([b"ok", b"ok"], [0, 2], 1)
    else:
        assert (texts, got.record.tolist(), got.counts["skipped_records"]) == ([b"ok", text, b"ok"], [0, 1, 2], 0)


def test_class_values_of_other_types_are_read_by_the_next_tier(tmp_path):
    data = b'{"text": "a", "c": 3}\n{"text": "b", "c": true}\n{"text": "c", "c": "x"}\n'
    container = Container("mem.jsonl", len(data), lambda: iter([data]), lambda: None)
    got = scan_jsonl(container, RecordOptions("jsonl", class_field="c"), DecodeSink())
    assert [got.class_names[k] for k in got.class_codes.tolist()] == ["3", "true", "x"]
