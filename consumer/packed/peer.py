"""Stores written by other tools, opened as datasets: Megatron's and fairseq's ``.bin/.idx`` and Modalities' ``.pbin``.

Most tokenized corpora were written by Megatron-LM's ``preprocess_data.py``, ``fairseq-preprocess`` or Modalities,
with no consumer sidecar and no file table. A prefix is such a *peer store* when it has no sidecar and no file table
(``PREFIX.consumer.npz``: a pack of ours interrupted before its sidecar has one, and stays an "incomplete pack"), and
holds ``PREFIX.idx`` + ``PREFIX.bin`` (either ``.idx`` flavour, a multimodal Megatron ``.idx`` included: its size
tells) or ``PREFIX.pbin``. Then:

- every sequence of the store is one document, and every document is in one class, named after the prefix;
- the ids are the store's own (a tokenizer's, not bytes): the vocabulary is ``vocab_size`` ids, from the argument
  or, without it, from the token dtype (``uint8`` 256, ``uint16`` 65536, ``int32`` 2**31, ``uint32`` 2**32); the
  five special ids (EOF, PAD, MASK, CLS, SEP) come after it (:class:`~consumer.tokens.vocab.TokenVocab`);
- a document is its tokens as stored: no header, no SEP, no EOF added (Megatron's own EOD, if the store has one,
  is a token like any other); a document's ``size`` is its token count;
- its paths are ``NAME#i`` (``i`` the sequence), made only when asked for;
- a ``.bin/.idx`` store's full check (the ``.idx`` pointers and document indices) is recorded per version of its
  files, as a store of ours is (:mod:`consumer.dataset.store_index`): a reopen reads its ``.idx`` header only;
- the store has no chunk sums: every id read is checked against the vocabulary (``vocab_size`` smaller than an
  id the store holds: FormatError when that id is read, or at open with ``verify=True``), and ``consumer verify``
  reads every id.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..formats.mmidx import IndexedReader
from ..formats.pbin import read_pbin
from ..sources.page_cache import wants_readahead
from ..sources.paths import PathList
from ..sources.records.names import RecordPaths
from ..sources.token_store import MappedTokens
from ..sources.version import versions_identity
from ..storage import Storage
from ..tokens.vocab import TokenVocab
from .layout import SIDECAR_SUFFIX, TABLE_SUFFIX, recorded_end, with_suffix
from .sums import data_offset

__all__ = ["is_peer_store", "load_peer", "dtype_vocab_size"]

_FROM_DTYPE = {"u1": 256, "u2": 1 << 16, "i2": 1 << 15, "i4": 1 << 31, "u4": 1 << 32}


def is_peer_store(prefix: Path) -> bool:
    """Whether ``prefix`` names a store written by another tool (see the module docstring): no sidecar, no file
    table of ours, and a ``.bin``/``.idx`` pair or a ``.pbin``."""
    if with_suffix(prefix, SIDECAR_SUFFIX).exists() or with_suffix(prefix, TABLE_SUFFIX).exists():
        return False
    pair = with_suffix(prefix, ".idx").is_file() and with_suffix(prefix, ".bin").is_file()
    return pair or with_suffix(prefix, ".pbin").is_file()


def dtype_vocab_size(dtype: np.dtype, where: Any) -> int:
    """The vocabulary a token dtype implies (see the module docstring); FormatError for one that implies none."""
    key = f"{dtype.kind}{dtype.itemsize}"
    if key not in _FROM_DTYPE:
        raise FormatError(f"{where}: token dtype {dtype.name} implies no vocabulary size: pass vocab_size=")
    return _FROM_DTYPE[key]


def _indexed(prefix: Path, check: bool = True, tokens: int | None = None) -> IndexedReader:
    """The ``.bin/.idx`` pair, a multimodal ``.idx`` recognised by its size (``check=False``: its header only, and
    ``tokens`` recorded for it, the sum of its lengths)."""
    try:
        return IndexedReader(str(prefix), check=check, tokens=tokens)
    except FormatError as e:
        if "pass multimodal=True" not in str(e):
            raise
    return IndexedReader(str(prefix), multimodal=True, check=check, tokens=tokens)


class _Counting:
    """``0, 1, ..., n - 1`` as slices are asked for (the record numbers of a peer store's paths: no array of them)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        lo, hi, _ = s.indices(self.n)
        return np.arange(lo, hi, dtype=np.int64)


def peer_paths(name: str, n: int) -> PathList:
    """``name#0`` ... ``name#{n-1}``, made when first asked for."""
    return RecordPaths(([name], np.zeros(n, dtype=np.int8), _Counting(n)))


def _files(prefix: Path, files: dict[str, str]) -> list[Path]:
    return [with_suffix(prefix, suffix) for suffix in files.values()]


def load_peer(prefix: Path, storage: Storage, vocab_size: int | None, recall: Any = None) -> dict[str, Any]:
    """The peer store at ``prefix``, as the fields of a :class:`~consumer.packed.open.Store`: its sidecar made
    here (``"peer": True``), tokens memory-mapped, every sequence a document of class ``prefix.name``.
    ``recall(identity)``: the recorded full check of this version of a ``.bin/.idx`` store (each document's start
    and length), which spares reading its ``.idx`` per document (see :func:`~consumer.packed.open.load_store`)."""
    checked = None
    if with_suffix(prefix, ".idx").is_file():
        files = {"bin": ".bin", "idx": ".idx"}
        identity = versions_identity({"peer": 1, "vocab_size": vocab_size}, _files(prefix, files))
        checked = recall(identity) if recall is not None else None
        ends = None if checked is None else recorded_end(checked.starts, checked.lengths)
        reader = _indexed(prefix, check=checked is None, tokens=ends)
        if checked is not None and checked.starts.shape[0] != len(reader):  # a record of another store: check all
            checked, reader = None, _indexed(prefix)
        fmt, dtype, tokens = "megatron", reader.dtype, reader.tokens
        if checked is not None:
            lengths, starts = checked.lengths, checked.starts
        else:  # the full check proved pointers = itemsize * the lengths' exclusive sum: no 800 MB read of them
            lengths = reader.lengths
            starts = np.cumsum(lengths, dtype=np.int64)
            starts -= lengths
        data_file = with_suffix(prefix, ".bin")
        flavour = reader.flavour + (" (multimodal)" if reader.modes is not None else "")
    else:
        pb = read_pbin(with_suffix(prefix, ".pbin"))
        fmt, tokens, width = "modalities", pb.data.view(np.ndarray), pb.token_size_in_bytes
        dtype = tokens.dtype
        lengths, starts = pb.index[:, 1] // width, pb.index[:, 0] // width
        data_file, files, flavour = with_suffix(prefix, ".pbin"), {"pbin": ".pbin"}, "modalities"
        identity = versions_identity({"peer": 1, "vocab_size": vocab_size}, _files(prefix, files))
    where = str(prefix)
    size = dtype_vocab_size(dtype, where) if vocab_size is None else vocab_size
    if dtype.kind not in "iu":
        raise FormatError(f"{where}: token dtype expected an integer dtype, got {dtype.name}")
    n = int(lengths.shape[0])
    stats = {kind: os.stat(with_suffix(prefix, suffix)) for kind, suffix in files.items()}
    side = {"format": "peer", "peer": True, "store": fmt, "flavour": flavour, "dtype": dtype.name, "n_bytes": None,
            "vocab_size": int(size), "metadata": None, "with_header": False, "max_header_bytes": 0, "headers": [""],
            "classes": [prefix.name], "class_to_id": {prefix.name: 0}, "documents": n,
            "tokens": int(tokens.size), "spec": None, "tokens_sha256": None,
            "files": {kind: {"name": prefix.name + files[kind], "size": st.st_size} for kind, st in stats.items()}}
    readahead = wants_readahead(int(tokens.size) * tokens.itemsize, storage.readahead)
    return {"prefix": prefix, "sidecar": side, "fmt": fmt, "vocab": TokenVocab(int(size)),
            "paths": peer_paths(prefix.name, n), "doc_class": np.zeros(n, dtype=np.int32),
            "doc_size": lengths, "doc_header": np.zeros(n, dtype=np.int32), "lengths": lengths,
            "starts": np.asarray(starts, dtype=np.int64),
            "tokens": MappedTokens(tokens, None, str(data_file), data_offset(fmt), readahead=readahead),
            "identity": identity, "checked": checked}
