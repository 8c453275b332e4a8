"""Many raw JSON strings to their UTF-8 text at once, in numpy: :func:`strings_to_utf8`.

The JSONL scanner asks msgspec for the text field as :class:`msgspec.Raw` (the string's JSON, quotes and escapes
included, skipped over in C without building a ``str``) and joins those into one buffer. This module turns that
buffer into the documents' UTF-8 bytes without a Python step per string:

- escapes start at a backslash that is at an even offset of its run of backslashes (``\\\\\\\\`` is one escaped
  backslash, the next backslash starts a new escape); ``\\"``, ``\\\\`` and ``\\/`` keep their second byte,
  ``\\b \\f \\n \\r \\t`` replace it, and the backslash is dropped;
- ``\\uXXXX`` becomes the code point's UTF-8 (1 to 3 bytes written over the escape, the rest dropped), a high
  surrogate escape followed at once by a low one becomes one 4-byte code point; an unpaired surrogate is not
  Unicode text, so the block is refused;
- the quotes are dropped; when no string holds an escape nothing is copied (each text is a slice of the buffer
  between its quotes);
- the buffer must be valid UTF-8 (checked once for the whole buffer by Arrow when it holds a byte >= 0x80: the
  strings are separated by quotes and escapes are ASCII, so the whole is valid exactly when every text is; the
  UTF-8 written for ``\\u`` escapes is valid by construction).

msgspec has already checked the JSON of every string (the escapes' syntax, no control characters), so a block
this module refuses holds a string that is not a string (another JSON value at the text field), an unpaired
surrogate or bytes that are not UTF-8: the scanner then reads that block line by line to name the record.
"""

from __future__ import annotations

import numpy as np

__all__ = ["escape_starts", "strings_to_utf8", "valid_utf8"]

_HEX = np.full(256, -1, dtype=np.int32)
for _k, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _k
for _k, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _k
_SIMPLE = np.arange(256, dtype=np.uint8)  # the byte an escape ``\X`` stands for, at X
for _c, _v in zip(b"bfnrt", b"\b\f\n\r\t"):
    _SIMPLE[_c] = _v


def escape_starts(buf: np.ndarray) -> np.ndarray:
    """Positions of the backslashes that start an escape (even offsets in their run of backslashes)."""
    bs = np.flatnonzero(buf == 0x5C)
    if bs.size < 2:
        return bs
    idx = np.arange(bs.size)
    run_first = np.zeros(bs.size, dtype=np.int64)
    new = np.empty(bs.size, dtype=bool)
    new[0] = True
    np.not_equal(bs[1:], bs[:-1] + 1, out=new[1:])
    run_first[new] = idx[new]
    np.maximum.accumulate(run_first, out=run_first)
    starts: np.ndarray = bs[((idx - run_first) & 1) == 0]
    return starts


def _code_points(buf: np.ndarray, u: np.ndarray) -> np.ndarray | None:
    """The code points of the ``\\uXXXX`` escapes at ``u`` (None when a hex digit is not one)."""
    digits = _HEX[buf[u[:, None] + np.arange(2, 6)]]
    if (digits < 0).any():
        return None
    return np.asarray((digits[:, 0] << 12) | (digits[:, 1] << 8) | (digits[:, 2] << 4) | digits[:, 3])


def _unicode(buf: np.ndarray, u: np.ndarray, drop: list[np.ndarray]) -> bool:
    """Write the UTF-8 of the ``\\u`` escapes at ``u`` over them in ``buf`` (surrogate pairs joined) and add the
    bytes left over to ``drop``. False when an escape is not valid Unicode (a bad hex digit, an unpaired
    surrogate)."""
    cp = _code_points(buf, u)
    if cp is None:
        return False
    high = (cp & 0xFC00) == 0xD800
    low = (cp & 0xFC00) == 0xDC00
    if high.any() or low.any():
        nxt = np.zeros(u.size, dtype=bool)  # the escape after each is a low surrogate right behind it
        nxt[:-1] = low[1:] & (u[1:] == u[:-1] + 6)
        paired_low = np.zeros(u.size, dtype=bool)
        paired_low[1:] = high[:-1] & nxt[:-1]
        if not (nxt[high].all() and (paired_low == low).all()):
            return False
        cp = np.where(high, 0x10000 + ((cp - 0xD800) << 10) + (np.roll(cp, -1) - 0xDC00), cp)
        keep = ~low
        u, cp, high = u[keep], cp[keep], high[keep]
    span = np.where(high, 12, 6)
    n_out = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    lead = np.select([n_out == 1, n_out == 2, n_out == 3], [cp, 0xC0 | (cp >> 6), 0xE0 | (cp >> 12)],
                     0xF0 | (cp >> 18))
    for j in range(4):  # byte 0 the lead; byte j >= 1 holds bits 6 * (n - 1 - j) and up of the code point
        sel = n_out > j
        if j == 0:
            buf[u] = lead
        else:
            buf[u[sel] + j] = 0x80 | ((cp[sel] >> (6 * (n_out[sel] - 1 - j))) & 0x3F)
    for off in range(1, 12):
        sel = (off >= n_out) & (off < span)
        drop.append(u[sel] + off)
    return True


def valid_utf8(buf: np.ndarray) -> bool:
    """Whether ``buf`` is UTF-8 (Arrow's validation; nothing to do for ASCII)."""
    if not buf.size or int(buf.max()) < 0x80:
        return True
    import pyarrow as pa  # noqa: PLC0415  (a core dependency; imported only for non-ASCII text)

    whole = pa.Array.from_buffers(pa.large_utf8(), 1, [None, pa.py_buffer(np.array([0, buf.size], np.int64)),
                                                       pa.py_buffer(buf)])
    try:
        whole.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def strings_to_utf8(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The UTF-8 texts of the raw JSON strings ``buf[starts[k]:ends[k]]`` (quotes included; ``buf`` holds
    nothing else between them): ``(data, offset, length)`` with text ``k`` at ``data[offset[k]:offset[k] +
    length[k]]`` (``data`` may be ``buf`` itself), or None when one of them is not a JSON string holding Unicode
    text (see the module docstring). A writable ``buf`` is unescaped in place (its bytes are then spent)."""
    if not starts.size:
        return buf, starts.copy(), starts.copy()
    if (buf[starts] != 0x22).any() or (ends - starts < 2).any():
        return None  # another JSON value (a number, an object, null) where a string was wanted
    if not valid_utf8(buf):  # escapes are ASCII: the strings are UTF-8 exactly when their texts are
        return None
    esc = escape_starts(buf)
    if not esc.size:
        return buf, starts + 1, ends - starts - 2
    work = buf if buf.flags.writeable else buf.copy()
    kind = work[esc + 1]
    is_u = kind == 0x75
    simple = esc[~is_u]
    work[simple + 1] = _SIMPLE[kind[~is_u]]
    drop = [simple]
    if is_u.any() and not _unicode(work, esc[is_u], drop):
        return None
    escaped = np.sort(np.concatenate(drop)) if len(drop) > 1 else simple  # the escapes' bytes dropped, in order
    keep = np.ones(work.size, dtype=bool)
    keep[starts] = keep[ends - 1] = keep[escaped] = False  # and the quotes
    data = work[keep]
    first = np.searchsorted(escaped, starts)  # each text's first dropped escape byte
    length = (ends - starts - 2) - (np.append(first[1:], escaped.size) - first)
    offset = np.zeros(starts.size, dtype=np.int64)
    np.cumsum(length[:-1], out=offset[1:])
    return data, offset, length
