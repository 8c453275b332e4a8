"""Byte tokens and the vocabulary: the token contract of ``docs/design.md`` §1 in code.

A token is ``n_bytes`` consecutive bytes read big-endian, so data ids are ``0 .. 256**n_bytes - 1``
(the same ids as gperc). The ids above that range are special tokens, in this fixed order::

    EOF  = 256**n_bytes        end of a file (gperc's id)
    PAD  = EOF + 1             padding after the last real token of a row
    MASK = EOF + 2             masked-LM replacement
    CLS  = EOF + 3             prepended to rows when ``add_cls`` is on
    SEP  = EOF + 4             ends the file-type header of a document
    TAIL_k = EOF + 4 + k       k = 1 .. n_bytes-1: "the next token holds only k bytes"

Lossless tails: a byte string whose length is not a multiple of ``n_bytes`` ends with the marker
``TAIL_k`` followed by one data token whose first ``k`` bytes are the tail and whose other bytes are
zero. So every id stays in ``[0, vocab.size)``, every special id is above every data id, and
``decode(encode(b)) == b`` for every byte string. Conversion is arithmetic on numpy arrays; no table
is ever built (``n_bytes=3`` costs no memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, short_repr

__all__ = ["VALID_N_BYTES", "Vocab", "TokenVocab", "bytes_to_ids", "decode_ids", "encode_bytes", "n_content_tokens"]

VALID_N_BYTES = (1, 2, 3)
_SPECIAL_NAMES = ("EOF", "PAD", "MASK", "CLS", "SEP")


@dataclass(frozen=True)
class Vocab:
    """Token ids for one ``n_bytes`` setting: data range, special ids and the total ``size``.

    Build it with ``Vocab(n_bytes)``; every other field is derived. ``size`` is the number of ids a
    model's embedding table needs (all ids are ``< size``).
    """

    n_bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.n_bytes, bool) or not isinstance(self.n_bytes, (int, np.integer)) \
                or int(self.n_bytes) not in VALID_N_BYTES:
            raise InputError(f"n_bytes must be one of {VALID_N_BYTES}, got {short_repr(self.n_bytes)}")
        object.__setattr__(self, "n_bytes", int(self.n_bytes))

    @property
    def n_data(self) -> int:
        """Number of data ids, ``256**n_bytes`` (ids ``0 .. n_data-1``)."""
        return 256 ** self.n_bytes

    @property
    def eof(self) -> int:
        """End-of-file id, ``256**n_bytes`` as in gperc."""
        return self.n_data

    @property
    def pad(self) -> int:
        """Padding id (rows are padded with it; ``attention_mask`` is 0 there)."""
        return self.n_data + 1

    @property
    def mask(self) -> int:
        """Masked-LM replacement id."""
        return self.n_data + 2

    @property
    def cls(self) -> int:
        """Classification id prepended to rows when ``add_cls`` is on."""
        return self.n_data + 3

    @property
    def sep(self) -> int:
        """Separator id between a document's header and its content."""
        return self.n_data + 4

    def tail(self, k: int) -> int:
        """Marker id announcing that the next token carries only ``k`` bytes (1 <= k < n_bytes)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < self.n_bytes:
            raise InputError(f"tail length k must be in 1..{self.n_bytes - 1}, got {short_repr(k)}")
        return self.n_data + 4 + k

    @property
    def size(self) -> int:
        """Total number of ids: data ids, 5 specials and ``n_bytes - 1`` tail markers."""
        return self.n_data + 5 + (self.n_bytes - 1)

    @property
    def stored_ids(self) -> int:
        """The ids a packed store may hold are ``< stored_ids``: every id (a store of ours holds whole documents,
        specials included)."""
        return self.size

    @property
    def specials(self) -> dict[str, int]:
        """Every special id by name (``EOF``, ``PAD``, ``MASK``, ``CLS``, ``SEP``, ``TAIL1`` ...)."""
        out = {name: self.n_data + i for i, name in enumerate(_SPECIAL_NAMES)}
        for k in range(1, self.n_bytes):
            out[f"TAIL{k}"] = self.tail(k)
        return out

    def to_dict(self) -> dict:
        """JSON-able description: ``n_bytes``, ``size``, ``n_data`` and every special id."""
        return {"n_bytes": self.n_bytes, "size": self.size, "n_data": self.n_data, "specials": self.specials}

    def encode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Tokens (int64) of a byte string, with the lossless tail rule. Same as :func:`encode_bytes`."""
        return encode_bytes(data, self)

    def decode(self, ids, *, specials: str = "skip") -> bytes:
        """Bytes of a token sequence. Same as :func:`decode_ids`."""
        return decode_ids(ids, self, specials=specials)


@dataclass(frozen=True, init=False)
class TokenVocab(Vocab):
    """The ids of a store another tool wrote (Megatron, fairseq, Modalities): a tokenizer's ids, not bytes.

    ``TokenVocab(n_tokens)``: data ids ``0 .. n_tokens - 1`` as the store holds them, then the five specials in
    the usual order (EOF, PAD, MASK, CLS, SEP); no tail markers. ``n_bytes`` is 1 (one id a token) and means
    nothing else here. Nothing decodes to bytes: :meth:`decode` and :meth:`encode` refuse, naming why.
    """

    n_tokens: int

    def __init__(self, n_tokens: int) -> None:
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, (int, np.integer)) or int(n_tokens) < 1:
            raise InputError(f"vocab_size must be an int >= 1, got {short_repr(n_tokens)}")
        object.__setattr__(self, "n_bytes", 1)
        object.__setattr__(self, "n_tokens", int(n_tokens))

    @property
    def n_data(self) -> int:
        """Number of data ids, the store's vocabulary size."""
        return self.n_tokens

    def tail(self, k: int) -> int:
        """Refused: a token store has no partial tokens."""
        raise InputError(f"tail markers: a vocabulary of {self.n_tokens} store ids has none")

    @property
    def size(self) -> int:
        """Total number of ids: the store's ids and the 5 specials."""
        return self.n_tokens + 5

    @property
    def specials(self) -> dict[str, int]:
        """Every special id by name (``EOF``, ``PAD``, ``MASK``, ``CLS``, ``SEP``)."""
        return {name: self.n_tokens + i for i, name in enumerate(_SPECIAL_NAMES)}

    @property
    def stored_ids(self) -> int:
        """The ids the store may hold are its own, ``< n_tokens`` (the specials are ours: never in the store)."""
        return self.n_tokens

    def to_dict(self) -> dict:
        """JSON-able description: ``n_tokens`` (the store's vocabulary), ``size``, ``n_data`` and the specials."""
        return {"n_tokens": self.n_tokens, "size": self.size, "n_data": self.n_data, "specials": self.specials}

    def refuse(self, what: str) -> InputError:
        """Why ``what`` (decode, encode) cannot be done with store ids."""
        return InputError(f"{what}: the ids of this store are a tokenizer's ({self.n_tokens} ids, written by another "
                          "tool), not bytes; decode them with the tokenizer that wrote the store")

    def encode(self, data: bytes | bytearray | memoryview) -> np.ndarray:
        """Refused (InputError): bytes are not store ids."""
        raise self.refuse("encode")

    def decode(self, ids, *, specials: str = "skip") -> bytes:
        """Refused (InputError): store ids are not bytes."""
        raise self.refuse("decode")


def n_content_tokens(n_bytes_in: np.ndarray | int, n_bytes: int):
    """Token count of byte strings of the given lengths: full tokens plus 2 for a partial tail."""
    size = np.asarray(n_bytes_in, dtype=np.int64)
    if n_bytes == 1:
        out = size.copy()
    elif n_bytes == 2:  # shifts, not a division (a million documents: a few ms)
        out = size >> 1
        out += (size & 1) << 1
    else:
        full, rem = np.divmod(size, n_bytes)
        out = full + 2 * (rem > 0)
    return int(out) if out.ndim == 0 else out


def bytes_to_ids(buf: np.ndarray, n_bytes: int) -> np.ndarray:
    """Big-endian ids of a uint8 buffer whose length is a multiple of ``n_bytes`` (a view when possible).

    ``n_bytes`` 1 and 2 return zero-copy views (``uint8`` / ``>u2``); 3 computes uint32 ids.
    """
    buf = np.ascontiguousarray(buf, dtype=np.uint8).reshape(-1)
    if buf.size % n_bytes:
        raise InputError(f"buffer length must be a multiple of n_bytes={n_bytes}, got {buf.size}")
    if n_bytes == 1:
        return buf
    if n_bytes == 2:
        return buf.view(">u2")
    b = buf.reshape(-1, 3).astype(np.uint32)
    return (b[:, 0] << 16) | (b[:, 1] << 8) | b[:, 2]


def encode_bytes(data: bytes | bytearray | memoryview, vocab: Vocab) -> np.ndarray:
    """Token ids (int64) of ``data``: full big-endian tokens, then ``TAIL_k`` + padded tail if needed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):  # bytes(10**10) would allocate 10 GB of zeros
        raise InputError(f"data must be bytes, bytearray or memoryview, got {type(data).__name__}: {short_repr(data)}")
    if isinstance(vocab, TokenVocab):
        raise vocab.refuse("encode")
    nb = vocab.n_bytes
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    nfull, k = divmod(raw.size, nb)
    out = np.empty(n_content_tokens(raw.size, nb), dtype=np.int64)
    out[:nfull] = bytes_to_ids(raw[: nfull * nb], nb)
    if k:
        padded = np.zeros(nb, dtype=np.uint8)
        padded[:k] = raw[nfull * nb:]
        out[nfull] = vocab.tail(k)
        out[nfull + 1] = int(bytes_to_ids(padded, nb)[0])
    return out


_SPECIAL_MODES = ("skip", "tags")


def decode_ids(ids, vocab: Vocab, *, specials: str = "skip") -> bytes:
    """The bytes behind a token sequence: the exact inverse of :func:`encode_bytes`.

    ``ids`` is any 1-D integer sequence (list, numpy array or torch tensor). Special tokens are
    dropped (``specials="skip"``) or rendered as ``<EOF>``, ``<PAD>``, ... (``specials="tags"``).
    A data token after ``TAIL_k`` contributes only its first ``k`` bytes. Ids outside
    ``[0, vocab.size)`` and non-integers (``1.7`` is not rounded to 1, ``True`` is not 1) raise
    :class:`InputError`. Fully vectorised. A :class:`TokenVocab` (a store another tool wrote) refuses: its ids
    are a tokenizer's, not bytes.
    """
    if isinstance(vocab, TokenVocab):
        raise vocab.refuse("decode")
    if specials not in _SPECIAL_MODES:
        raise InputError(f"specials must be one of {_SPECIAL_MODES}, got {short_repr(specials)}")
    if not isinstance(vocab, Vocab):
        raise InputError(f"vocab must be a consumer.Vocab, got {short_repr(vocab)}")
    if hasattr(ids, "detach"):  # torch tensor, without importing torch
        ids = ids.detach().cpu().numpy()
    try:
        raw = np.asarray(ids)
        if raw.dtype.kind in "fO" and isinstance(ids, (list, tuple)) and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in ids):
            raw = np.array([int(v) for v in ids], dtype=object)  # int mixed with uint64 became float64: exact
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"ids must be a sequence of integer token ids, got {short_repr(ids)}") from None
    raw = raw.reshape(-1)
    if raw.size == 0:
        return b""
    if raw.dtype == object and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                   for v in raw.tolist()):
        values = raw.tolist()
        outside = [v for v in values if not 0 <= v < vocab.size]
        if outside:
            raise InputError(f"ids contain values outside [0, {vocab.size}): {short_repr(outside[:5])}")
        raw = np.array(values, dtype=np.int64)
    if raw.dtype == np.bool_ or not np.issubdtype(raw.dtype, np.integer):
        first = next((v for v in raw.tolist() if not isinstance(v, int) or isinstance(v, bool)), raw[0])
        raise InputError(f"ids must be integer token ids (floats are not rounded, bools are refused), "
                         f"got {short_repr(first)} (dtype {raw.dtype})")
    bad = (raw < 0) | (raw >= vocab.size)  # on the original dtype: uint64 values never wrap
    if bad.any():
        raise InputError(f"ids contain values outside [0, {vocab.size}): {short_repr(raw[bad][:5].tolist())}")
    arr = raw.astype(np.int64)
    nb = vocab.n_bytes
    is_data = arr < vocab.n_data
    # bytes contributed per token: nb for data, k after a TAIL_k marker, tag length or 0 for specials
    count = np.where(is_data, nb, 0)
    if nb > 1:
        k_of = arr - vocab.sep  # 1..nb-1 for TAIL markers
        marker = ~is_data & (k_of >= 1) & (k_of < nb)
        follow = np.flatnonzero(marker[:-1] & is_data[1:]) + 1
        count[follow] = k_of[follow - 1]
    digits = np.zeros((arr.size, nb), dtype=np.uint8)
    data_ids = np.where(is_data, arr, 0)
    for j in range(nb):  # nb <= 3 columns, each vectorised
        digits[:, j] = (data_ids >> (8 * (nb - 1 - j))) & 0xFF
    keep = np.arange(nb)[None, :] < count[:, None]
    if specials == "skip":
        return digits[keep].tobytes()
    tags = {vocab.specials[name]: f"<{name}>".encode() for name in vocab.specials}
    tag_len = np.zeros(arr.size, dtype=np.int64)
    for tid, tag in tags.items():
        tag_len[arr == tid] = len(tag)
    total = count + tag_len
    starts = np.cumsum(total) - total
    out = np.empty(int(total.sum()), dtype=np.uint8)
    # data bytes: position of byte j of token i is starts[i] + j
    rows, cols = np.nonzero(keep)
    out[starts[rows] + cols] = digits[rows, cols]
    for tid, tag in tags.items():
        pos = np.flatnonzero(arr == tid)
        if pos.size:
            t = np.frombuffer(tag, dtype=np.uint8)
            out[(starts[pos][:, None] + np.arange(t.size)[None, :]).reshape(-1)] = np.tile(t, pos.size)
    return out.tobytes()
