"""msgspec's decoders of a JSONL record's wanted fields (typed structs built from the dotted field paths, so that
msgspec skips everything else while it parses), and what is wrong with a line it refused, in the user's terms.
Used by the scanner (:mod:`.jsonl`) and by reads of JSON texts (:mod:`.jsonl_read`)."""

from __future__ import annotations

import functools
import re
from operator import attrgetter
from typing import Any

from ...errors import MissingDependencyError
from .options import RecordOptions, field_tree

__all__ = ["finite_record", "import_msgspec", "record_decoder", "why_bad"]

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def import_msgspec() -> Any:
    """The msgspec module (MissingDependencyError naming the install when it is missing)."""
    try:
        import msgspec  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:
        raise MissingDependencyError(f"documents='jsonl' needs msgspec (pip install msgspec): {e}") from e
    return msgspec


def _struct(msgspec: Any, tree: dict[str, Any], name: str) -> Any:
    """A struct type for a tree ``{json key: subtree or leaf type}`` (fields ``f0, f1, ...`` renamed to the keys)."""
    fields, rename = [], {}
    for j, (key, sub) in enumerate(sorted(tree.items())):
        fields.append((f"f{j}", _struct(msgspec, sub, f"{name}_{j}") if isinstance(sub, dict) else sub))
        rename[f"f{j}"] = key
    return msgspec.defstruct(name, fields, rename=rename)


def _attrs(tree: dict[str, Any], parts: list[str]) -> list[str]:
    """The struct attribute names along the dotted path ``parts`` of ``tree``."""
    out, node = [], tree
    for key in parts:
        out.append(f"f{sorted(node).index(key)}")
        node = node[key]
    return out


@functools.lru_cache(maxsize=16)  # built once per options (msgspec types): not once per container scanned
def record_decoder(options: RecordOptions) -> tuple[Any, Any, Any]:
    """msgspec decoders of one JSON line and of a JSON array of lines into structs holding only the text (at
    ``text_field``) and the class (at ``class_field``), and ``take(records) -> (texts, classes or None)``. One
    line's text is a ``str``; the array's texts are :class:`msgspec.Raw` (the string's JSON, not decoded: see
    :mod:`.json_strings`)."""
    msgspec = import_msgspec()
    tree = field_tree(options, str, str | int | bool)
    record = _struct(msgspec, tree, "Record")
    raw_record = _struct(msgspec, field_tree(options, msgspec.Raw, str | int | bool), "RawRecord")
    text_of = attrgetter(".".join(_attrs(tree, options.text_field.split("."))))
    class_of = attrgetter(".".join(_attrs(tree, options.class_field.split(".")))) if options.class_field else None

    def take(records: list[Any]) -> tuple[list[Any], list[str] | None]:
        texts = list(map(text_of, records))
        if class_of is None:
            return texts, None
        return texts, [str(v).lower() if isinstance(v, bool) else str(v) for v in map(class_of, records)]

    return msgspec.json.Decoder(record), msgspec.json.Decoder(list[raw_record]), take  # type: ignore[valid-type]


def finite_record(line: bytes) -> bytes | None:
    """The record ``line`` with the constants ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, but what Python's
    ``json.dumps`` writes for such floats, and what Arrow's reader, the scanner's first tier, accepts) written as
    ``null``, to decode again; None when it holds none of them or is not a record even so (the line is then bad).
    Rare: only lines msgspec refused come here."""
    import json  # noqa: PLC0415  (only for lines msgspec refused)

    found = []

    def constant(name: str) -> None:
        found.append(name)

    try:
        record = json.loads(line, parse_constant=constant)
    except (ValueError, RecursionError):
        return None
    return json.dumps(record).encode("ascii") if found else None  # ASCII escapes: the texts decode as before


def why_bad(line: bytes, error: Exception, options: RecordOptions) -> str:
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
