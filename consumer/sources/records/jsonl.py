"""``documents="jsonl"``: each non-blank line is a JSON object; the document is the UTF-8 of the string at
``text_field`` (a dotted path such as ``meta.text`` reaches into nested objects). An empty string is an empty
document. Blank lines (only spaces, tabs, ``\\r``) are skipped and counted. Lines end at 0x0A only (U+2028, U+2029
and NEL inside strings are text), and a ``\\r`` before the ``\\n`` is JSON whitespace.

Parsing is msgspec's typed decoder (a struct holding only the wanted fields, so other fields are skipped in C:
measured ~250 MB/s per core, against ~120 MB/s for the standard library's ``json`` and pyarrow's JSON reader on
one thread; docs/benchmarks.md). The decoded text has no byte range in the container (escapes), so every document is
written to the decode cache; the record's line is kept as a byte range (the SQL ``json`` column).

Bad records (invalid JSON, not an object, the field missing or not a string, a UTF-8 BOM, text that is not valid
Unicode, a line over :data:`MAX_RECORD_BYTES`) raise a FormatError naming the file, the line and its byte offset,
or are skipped and counted with ``on_bad_record="skip"``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...errors import MissingDependencyError
from .container import Container, line_spans
from .options import RecordOptions
from .scanned import BadRecords, DecodeSink, Scanned

__all__ = ["scan_jsonl", "record_decoder"]

_BLANK = b" \t\r\n"
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _msgspec() -> Any:
    try:
        import msgspec  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:
        raise MissingDependencyError(f"documents='jsonl' needs msgspec (pip install msgspec): {e}") from e
    return msgspec


def _struct(msgspec: Any, tree: dict, name: str) -> Any:
    """A struct type for a tree ``{json key: subtree or leaf type}`` (fields ``f0, f1, ...`` renamed to the keys)."""
    fields, rename = [], {}
    for j, (key, sub) in enumerate(sorted(tree.items())):
        fields.append((f"f{j}", _struct(msgspec, sub, f"{name}_{j}") if isinstance(sub, dict) else sub))
        rename[f"f{j}"] = key
    return msgspec.defstruct(name, fields, rename=rename)


def _attrs(tree: dict, parts: list[str]) -> list[str]:
    """The struct attribute names along the dotted path ``parts`` of ``tree``."""
    out, node = [], tree
    for key in parts:
        out.append(f"f{sorted(node).index(key)}")
        node = node[key]
    return out


def record_decoder(options: RecordOptions) -> tuple[Any, Any]:
    """A msgspec decoder of one JSON line into a struct holding only the text (at ``text_field``) and the class (at
    ``class_field``), and ``take(record) -> (text, class as str or None)``."""
    msgspec = _msgspec()
    wanted: list[tuple[list[str], Any]] = [(options.text_field.split("."), str)]
    if options.class_field:
        wanted.append((options.class_field.split("."), str | int | bool))
    tree: dict = {}
    for parts, leaf in wanted:
        node = tree
        for key in parts[:-1]:
            node = node.setdefault(key, {})
        node[parts[-1]] = leaf
    decoder = msgspec.json.Decoder(_struct(msgspec, tree, "Record"))
    text_at = _attrs(tree, wanted[0][0])
    class_at = _attrs(tree, wanted[1][0]) if options.class_field else None

    def dig(value: Any, attrs: list[str]) -> Any:
        for a in attrs:
            value = getattr(value, a)
        return value

    def take(rec: Any) -> tuple[str, str | None]:
        text = dig(rec, text_at)
        if class_at is None:
            return text, None
        label = dig(rec, class_at)
        return text, (str(label).lower() if isinstance(label, bool) else str(label))

    return decoder, take


def _why(line: bytes, error: Exception, options: RecordOptions) -> str:
    """What is wrong with a line msgspec refused, in the user's terms."""
    if line.startswith(b"\xef\xbb\xbf"):
        return "starts with a UTF-8 byte order mark (EF BB BF), which is not JSON; remove it"
    msg = str(error)
    if _SURROGATE.search(line):
        return "the record holds an unpaired surrogate escape (\\ud800-\\udfff): not Unicode text"
    if msg.startswith("Expected `object`"):
        return f"not a JSON object ({msg.split(', got ')[-1].split(' ')[0].strip('`')}); expected an object with " \
               f"the field {options.text_field!r}"
    if "missing required field" in msg:
        return f"the object has no field {msg.split('`')[1] if '`' in msg else options.text_field!r}: {msg}"
    return f"invalid JSON record ({msg})"


def scan_jsonl(container: Container, options: RecordOptions, sink: DecodeSink) -> Scanned:
    """The JSON records of ``container`` as documents (see the module docstring)."""
    from . import options as limits  # noqa: PLC0415  (read at call time: tests lower the limit)

    msgspec = _msgspec()
    decoder, take = record_decoder(options)
    decode, errors = decoder.decode, (msgspec.DecodeError, msgspec.ValidationError)
    bad = BadRecords(container.path, options.on_bad_record == "skip")
    offs, lens, recs, jo, jl, classes = [], [], [], [], [], []
    blank, line_no = 0, 0
    for buf, base, starts, ends in line_spans(container):
        texts: list[bytes] = []
        keep_s, keep_e, keep_r = [], [], []
        for a, b in zip((starts - base).tolist(), (ends - base).tolist()):
            line_no += 1
            if b - a > limits.MAX_RECORD_BYTES:
                bad.bad(f"a line of {b - a} bytes is longer than the limit of {limits.MAX_RECORD_BYTES} bytes",
                        f"line {line_no}", a + base)
                continue
            try:
                text, label = take(decode(buf[a:b]))
                data = text.encode("utf-8")
            except errors as e:
                line = bytes(buf[a:b])
                if not line.strip(_BLANK):
                    blank += 1
                    continue
                bad.bad(_why(line, e, options), f"line {line_no}", a + base)
                continue
            except UnicodeEncodeError:
                bad.bad(f"the field {options.text_field!r} holds an unpaired surrogate escape (\\ud800-\\udfff): not "
                        "Unicode text", f"line {line_no}", a + base)
                continue
            texts.append(data)
            keep_s.append(a + base)
            keep_e.append(b + base)
            keep_r.append(line_no - 1)
            if label is not None:
                classes.append(label)
        if texts:
            offs.append(sink.put_many(texts))
            lens.append(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
            recs.append(np.array(keep_r, dtype=np.int64))
            jo.append(np.array(keep_s, dtype=np.int64))
            jl.append(np.array(keep_e, dtype=np.int64) - jo[-1])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64))  # noqa: E731
    offset = cat(offs)
    lines = not container.compressed  # a compressed file's lines have no byte range in it (no json column)
    return Scanned(offset=offset, length=cat(lens), record=cat(recs), inplace=np.zeros(offset.size, dtype=bool),
                   classes=classes if options.class_field else None, json_offset=cat(jo) if lines else None,
                   json_length=cat(jl) if lines else None,
                   counts={"blank_lines": blank, "skipped_records": bad.skipped})
