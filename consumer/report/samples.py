"""A sample as a person reads it: its tokens decoded to bytes, the header and the special tokens marked.

Printable ASCII is shown as it is (escaped for HTML), a line feed breaks the line, every other byte is a ``\\xNN``
escape in its own colour; ``EOF``, ``SEP``, ``TAIL``, ``CLS``, ``MASK`` are tags and the trailing ``PAD`` run is one
tag with its length. The header (the tokens from a document's start to its ``SEP``) is shaded. Only the decoded text
of the tokens between special tokens is built, with one lookup per byte in numpy: no Python loop per byte.
"""

from __future__ import annotations

import html

import numpy as np

from ..tokens.vocab import Vocab, decode_ids

__all__ = ["bytes_html", "sample_html"]

_BYTE_TEXT = np.array([html.escape(chr(b)) if 32 <= b < 127 or b in (9, 10) else f"\\x{b:02x}" for b in range(256)],
                      dtype=object)
_PRINTABLE = np.array([32 <= b < 127 or b in (9, 10) for b in range(256)])


def bytes_html(data: bytes) -> str:
    """Bytes as safe HTML text: printable runs as text, the other bytes as ``\\xNN`` in ``<span class="esc">``."""
    arr = np.frombuffer(data, dtype=np.uint8)
    if not arr.size:
        return ""
    ok = _PRINTABLE[arr]
    cuts = np.flatnonzero(np.diff(ok.astype(np.int8))) + 1
    pieces = _BYTE_TEXT[arr]
    out = []
    for start, stop in zip(np.concatenate([[0], cuts]).tolist(), np.concatenate([cuts, [arr.size]]).tolist()):
        run = "".join(pieces[start:stop])
        out.append(run if ok[start] else f'<span class="esc">{run}</span>')
    return "".join(out)


def _tag(name: str, extra: str = "") -> str:
    kind = "TAIL" if name.startswith("TAIL") else name
    return f'<span class="tok {kind}">{name}{extra}</span>'


def sample_html(row: np.ndarray, vocab: Vocab, *, starts_document: bool, headers: bool, limit: int) -> str:
    """One sample row as HTML. ``starts_document``: the row begins at a document's first token (so at its
    header when ``headers``); at most ``limit`` tokens are decoded (the rest is counted)."""
    row = np.asarray(row, dtype=np.int64)
    names = {v: k for k, v in vocab.specials.items()}
    real = row.size
    while real and row[real - 1] == vocab.pad:  # the trailing PAD run (fetch pads at the end only)
        real -= 1
    pads = row.size - real
    shown = row[:min(real, limit)]
    special = np.flatnonzero(shown >= vocab.n_data).tolist()
    out: list[str] = []
    in_header = headers and starts_document
    pos = 0

    def data(stop: int) -> None:
        if stop > pos:
            piece = bytes_html(decode_ids(shown[pos:stop], vocab))
            out.append(f'<span class="hdr">{piece}</span>' if in_header else piece)

    for s in special:
        if s < pos:  # the data token after a TAIL marker, already shown
            continue
        data(s)
        token = int(shown[s])
        name = names.get(token, "?")
        pos = s + 1
        if name.startswith("TAIL") and s + 1 < shown.size:
            out.append(_tag(name) + bytes_html(decode_ids(shown[s:s + 2], vocab)))
            pos = s + 2
            continue
        out.append(_tag(name))
        if name == "EOF":
            out.append("\n")
            in_header = headers
        elif name == "SEP":
            in_header = False
    data(shown.size)
    if real > shown.size:
        out.append(f' <span class="note">\u2026 {real - shown.size:,} more tokens</span>')
    if pads:
        out.append(_tag("PAD", f" \u00d7 {pads:,}"))
    return "".join(out)
