"""JSON records nested deeper than ``MAX_JSON_DEPTH`` (512 levels, the record's own object level 1) are bad records
when indexed, naming the file, the line and the limit, in every tier of the scanner (Arrow's reader, msgspec's
block decoder, line by line; plain and compressed); records at the limit index, read and pack; and a read never
raises ``RecursionError``, not even from a deep call stack (msgspec recurses once a level). The depth measure itself
(``consumer.sources.records.json_depth``) is checked against a recursive walk of generated JSON."""

from __future__ import annotations

import gzip
import json
import random
import sys

import numpy as np
import pytest

from consumer import Consumer
from consumer.errors import FormatError
from consumer.sources.records import options as record_limits
from consumer.sources.records.json_depth import depth, too_deep

LIMIT = record_limits.MAX_JSON_DEPTH


def nested(levels: int, text: str = "x", kind: str = "array") -> str:
    """A record ``levels`` deep: its object, then ``levels - 1`` arrays (or objects) in the field ``y``."""
    n = levels - 1
    inner = "[" * n + "]" * n if kind == "array" else '{"a": ' * (n - 1) + "{}" + "}" * (n - 1)
    return json.dumps({"text": text})[:-1] + f', "y": {inner}}}'


def walk(value: object) -> int:
    """The depth by a recursive walk (the reference)."""
    if isinstance(value, dict):
        return 1 + max(map(walk, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(walk, value), default=0)
    return 0


def test_nested_helper_is_as_deep_as_it_says():
    for kind in ("array", "object"):
        assert walk(json.loads(nested(7, kind=kind))) == 7
        assert depth(np.frombuffer(nested(700, kind=kind).encode(), np.uint8)) == 700


# (file name, lines): the deep record is line 2, at byte 16; the other lines send the block to each tier
TIERS = {
    "arrow": ["{\"text\": \"first\"}", nested(1001), "{\"text\": \"last\"}"],
    "msgspec block": ["{\"text\": \"first\"}", nested(1001), " {\"text\": \"leading space: Arrow refuses\"}"],
    "line by line": ["{\"text\": \"first\"}", nested(1001), "{\"text\": \"last\"}", "{\"text\": 3}"],
    "objects": ["{\"text\": \"first\"}", nested(1001, kind="object"), "{\"text\": \"last\"}"],
    "just past": ["{\"text\": \"first\"}", nested(LIMIT + 1), "{\"text\": \"last\"}"],
}


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_record_nested_past_the_limit_is_a_bad_record_naming_file_line_and_limit(tmp_path, tier, compressed):
    data = ("\n".join(TIERS[tier]) + "\n").encode()
    p = tmp_path / ("deep.jsonl.gz" if compressed else "deep.jsonl")
    p.write_bytes(gzip.compress(data) if compressed else data)
    levels = LIMIT + 1 if tier == "just past" else 1001
    cache = tmp_path / "cache"
    with pytest.raises(FormatError, match=rf"deep\.jsonl(\.gz)?'?: line 2 at byte 18: the record nests arrays and "
                                          rf"objects {levels} levels deep \(its own object is level 1\), deeper than "
                                          rf"the limit of {LIMIT} \(MAX_JSON_DEPTH\)"):
        Consumer(str(p), documents="jsonl", text_field="text", cache_dir=cache)
    assert not list(cache.rglob("meta.json"))  # nothing partial cached
    if tier == "line by line":
        return  # line 4 is bad as well: skipping is shown by the other tiers
    ds = Consumer(str(p), documents="jsonl", on_bad_record="skip", cache_dir=False)
    assert ds.build_info["records"]["skipped_records"] == 1
    assert [ds.decode(ds.document_tokens(i)) for i in range(len(ds.files))] == \
        [json.loads(line)["text"].encode() for line in (TIERS[tier][0], TIERS[tier][2])]
    assert list(ds.sql("SELECT record FROM documents ORDER BY doc_id")) == [(0,), (2,)]


def test_record_with_a_class_field_nested_past_the_limit(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"text": "a", "label": "p"}) + "\n" + nested(2000)[:-1] + ', "label": "q"}\n')
    with pytest.raises(FormatError, match=r"c\.jsonl'?: line 2 at byte 28: the record nests arrays and objects 2000 "
                                          r"levels deep"):
        Consumer(str(p), documents="jsonl", class_field="label", cache_dir=False)


def test_hostile_depths_are_refused_quickly_and_unbalanced_ones_too(tmp_path):
    p = tmp_path / "h.jsonl"
    huge = '{"text": "x", "y": ' + "[" * (2 << 20) + "]" * (2 << 20) + "}"  # 4 MiB of brackets: measured by slices
    unclosed = '{"text": "x", "y": ' + "[" * 3000  # not JSON: how deep a parser would go before it found out
    p.write_text("\n".join([huge, unclosed, '{"text": "ok"}']) + "\n")
    with pytest.raises(FormatError, match=rf"h\.jsonl'?: line 1 at byte 0: the record nests arrays and objects "
                                          rf"{(2 << 20) + 1} levels deep"):
        Consumer(str(p), documents="jsonl", cache_dir=False)
    ds = Consumer(str(p), documents="jsonl", cache_dir=False, on_bad_record="skip")
    assert ds.build_info["records"]["skipped_records"] == 2
    assert ds.decode(ds.document_tokens(0)) == b"ok"


AT_LIMIT = [nested(LIMIT, "array at the limit"), nested(LIMIT, "objects at the limit", kind="object"),
            json.dumps({"text": "brackets in strings do not count: " + "[{" * 3000 + "\"\\",
                        "other": "]" * 3000 + '\\"[' * 3000, "y": [[[]]]})]


@pytest.mark.parametrize("compressed", [False, True])
def test_records_at_the_limit_index_read_and_pack(tmp_path, compressed):
    lines = [json.dumps({"text": f"plain {i}"}) for i in range(12)] + AT_LIMIT  # > 8 lines: read in one msgspec call
    texts = [json.loads(line)["text"].encode() for line in lines]
    data = ("\n".join(lines) + "\n").encode()
    p = tmp_path / ("ok.jsonl.gz" if compressed else "ok.jsonl")
    p.write_bytes(gzip.compress(data) if compressed else data)
    ds = Consumer(str(p), documents="jsonl", n_bytes=1, style="concat", seqlen=64, cache_dir=tmp_path / "c")
    assert [ds.decode(ds.document_tokens(i)) for i in range(len(texts))] == texts  # one at a time
    assert ds.decode(np.concatenate([ds.document_tokens(i) for i in range(len(texts))])) == b"".join(texts)
    assert len(ds.files) == len(texts) and len(ds[0:len(ds)]["input_array"]) == len(ds)  # every sample
    ds.pack(tmp_path / "store")
    again = Consumer.from_packed(tmp_path / "store")
    assert [again.decode(again.document_tokens(i)) for i in range(len(texts))] == texts
    back = Consumer(str(p), documents="jsonl", n_bytes=1, style="concat", seqlen=64, cache_dir=tmp_path / "c")
    assert back.build_info["records"]["reused"] == 1  # the persistent index, read back
    assert back.decode(back.document_tokens(len(texts) - 3)) == texts[-3]


def _at_depth(frames: int, fn):
    """``fn()`` called ``frames`` Python frames deeper than here."""
    return fn() if frames <= 0 else _at_depth(frames - 1, fn)


def _stack_depth() -> int:
    f, n = sys._getframe(), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


def test_reads_from_a_deep_stack_never_raise_recursion_error(tmp_path):
    """msgspec's budget is Python's recursion limit less the caller's stack: a read from deep down decodes the
    record again on a fresh thread."""
    lines = [nested(LIMIT, f"deep {i}") for i in range(10)] + [json.dumps({"text": "flat"})]
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(lines) + "\n")
    ds = Consumer(str(p), documents="jsonl", n_bytes=1, cache_dir=False)
    room = sys.getrecursionlimit() - _stack_depth() - 200  # the read's own frames fit, msgspec's 512 levels do not
    one = _at_depth(room, lambda: ds.decode(ds.document_tokens(3)))
    many = _at_depth(room, lambda: ds.fetch_numpy(np.arange(len(ds)), ["input_array"])["input_array"])
    assert one == b"deep 3"
    assert np.array_equal(many, ds.fetch_numpy(np.arange(len(ds)), ["input_array"])["input_array"])


def test_a_read_past_the_recursion_limit_is_a_format_error_not_recursion_error(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(nested(LIMIT, "deep") + "\n")
    ds = Consumer(str(p), documents="jsonl", cache_dir=False)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + 200)  # below what msgspec needs even on a fresh thread
    try:
        with pytest.raises(FormatError, match=r"d\.jsonl#0'?: its JSON record cannot be decoded: the record nests "
                                              r"arrays and objects too deep for msgspec's decoder under Python's "
                                              rf"recursion limit of \d+ \(records may nest {LIMIT} levels"):
            ds.document_tokens(0)
    finally:
        sys.setrecursionlimit(old)
    assert ds.decode(ds.document_tokens(0)) == b"deep"


def test_a_lower_limit_is_read_when_indexing(tmp_path, monkeypatch):
    monkeypatch.setattr(record_limits, "MAX_JSON_DEPTH", 3)
    p = tmp_path / "l.jsonl"
    p.write_text(nested(3) + "\n" + nested(4) + "\n")
    with pytest.raises(FormatError, match=r"line 2 at byte \d+: the record nests arrays and objects 4 levels deep "
                                          r"\(its own object is level 1\), deeper than the limit of 3"):
        Consumer(str(p), documents="jsonl", cache_dir=False)


def _value(rng: random.Random, levels: int) -> object:
    """A random JSON value: strings full of brackets, quotes and backslashes, nested up to ``levels``."""
    if levels <= 0 or rng.random() < 0.25:
        return rng.choice(["[{", "]}]", '"[', "\\", "\\\"{", "a\\\\", "", 1, None, 2.5, True, "\u00e9[", "x" * 40])
    if rng.random() < 0.5:
        return [_value(rng, levels - 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["k", "[", "{\"", "\\"]) + str(i): _value(rng, levels - 1) for i in range(rng.randint(0, 3))}


def test_depth_matches_a_recursive_walk():
    rng = random.Random(7)
    for _ in range(800):
        record = {"text": _value(rng, rng.randint(0, 10))}
        line = json.dumps(record, ensure_ascii=rng.random() < 0.5).encode()
        assert depth(np.frombuffer(line, np.uint8)) == walk(record), line


def test_too_deep_of_a_block_matches_the_depth_of_each_line():
    rng = random.Random(11)
    for _ in range(60):
        records = [{"text": _value(rng, rng.randint(0, 12)), "n": rng.randint(0, 9)} for _ in range(rng.randint(1, 9))]
        lines = [json.dumps(r).encode() for r in records]
        if rng.random() < 0.3:
            lines.insert(rng.randint(0, len(lines)), b'{"text": "an open string [[[')  # not JSON
        block = np.frombuffer(b"\n".join(lines), np.uint8)
        lens = np.array([len(x) for x in lines])
        starts = np.concatenate([[0], np.cumsum(lens[:-1] + 1)])
        limit = rng.randint(0, 6)
        want = {k: depth(np.frombuffer(x, np.uint8)) for k, x in enumerate(lines)}
        assert too_deep(block, starts, starts + lens, limit) == {k: d for k, d in want.items() if d > limit}


def test_depth_of_lines_longer_than_a_slice():
    """Lines over 1 MiB are measured a MiB at a time: strings, escapes and runs of backslashes across the cut."""
    for pad in range(0, 8):
        head = '{"text": "' + "a" * ((1 << 20) - 16 - pad)
        record = head + '\\\\\\\\\\"[[[\\\\", "y": [[{"z": "]]\\\\"}]], "w": ' + "[" * 40 + "]" * 40 + "}"
        line = record.encode()
        assert depth(np.frombuffer(line, np.uint8)) == walk(json.loads(record)) == 41
        block = np.frombuffer(line + b"\n" + line, np.uint8)
        n = len(line)
        assert too_deep(block, np.array([0, n + 1]), np.array([n, 2 * n + 1]), 40) == {0: 41, 1: 41}


def test_long_runs_of_backslashes_before_quotes():
    """A quote after an odd run of backslashes is text: runs past 32 are found by the whole region's escapes."""
    records = [{"text": "\\" * n + '"[{' + "\\" * m, "y": [[1]]} for n in (0, 1, 16, 17, 40, 41) for m in (0, 33, 34)]
    lines = [json.dumps(r).encode() for r in records]
    block = np.frombuffer(b"\n".join(lines), np.uint8)
    lens = np.array([len(x) for x in lines])
    starts = np.concatenate([[0], np.cumsum(lens[:-1] + 1)])
    assert too_deep(block, starts, starts + lens, 0) == {k: 3 for k in range(len(lines))}
    for k in (1, len(lines) - 1):  # and each alone
        assert too_deep(block, starts[k:k + 1], starts[k:k + 1] + lens[k:k + 1], 2) == {0: 3}
