"""The document table: per file, where its header, SEP, content and EOF sit in its token stream.

A document is ``[header tokens] SEP [content tokens] EOF`` (``metadata=None``: ``[content] EOF``).
Content tokens follow the lossless tail rule of :mod:`consumer.tokens.vocab`: ``nfull`` full tokens, then,
when the size is not a multiple of ``n_bytes``, ``TAIL_k`` and one padded token.

Headers repeat a lot (a corpus has few distinct file types), so they are stored once each in a
small CSR table (``header_ptr`` / ``header_tok``) and every file points at one (``doc_header``).
Everything is a flat numpy array; paths are kept in one :class:`~consumer.sources.paths.PathList` (a packed
blob, not 10^7 ``str`` objects).

Where the tokens come from: the source files (``packed is None``: the reader builds documents from
their bytes) or a packed store (:class:`PackedTokens`: the documents' tokens, ready-made, memory-mapped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..sources.paths import PathList
from .vocab import Vocab, encode_bytes, n_content_tokens

__all__ = ["DocumentTable", "PackedTokens", "RemoteFiles", "build_documents", "tokenise_headers"]


_NO_MTIMES = np.zeros(0, dtype=np.int64)  # "not given": replaced by zeros, one per document


@dataclass(frozen=True, eq=False)
class PackedTokens:
    """The documents' tokens in a packed store (``DocumentTable.packed``).

    ``tokens`` is the whole store as one read-only 1-D memory-mapped array in the store's dtype, or, for a
    store in object storage, a :class:`~consumer.sources.remote_tokens.RemoteTokens` with the same slicing and a
    ``copy_ranges`` method (the reader copies a batch's ranges through it); ``doc_ptr[i]`` (int64) is the
    position in ``tokens`` of the first token of document ``i`` of the ``DocumentTable``.
    ``store`` (the format name) and ``prefix`` say where it came from; ``data_file`` is the local file holding
    ``tokens`` (its ``stat`` tells a fetch the store changed in place), None for a store at a URL.
    ``verifier`` (a :class:`~consumer.formats.chunksums.ChunkVerifier`, None for a store packed before chunk
    sums) checks each chunk of ``tokens`` the first time it is read: every read of ``tokens`` calls
    ``verifier.check_ranges(tokens, src, cnt)`` (or ``check(tokens, byte_lo, byte_hi)``) first.
    """

    tokens: Any  # np.ndarray or RemoteTokens
    doc_ptr: np.ndarray
    store: str
    prefix: str
    data_file: str | None = None
    verifier: Any = None  # ChunkVerifier or None


@dataclass(frozen=True, eq=False)
class RemoteFiles:
    """How the reader fetches documents whose paths are URLs: a :class:`~consumer.sources.range_reader.RemoteReader`
    (concurrent range requests, retries, optional read-through cache) and each document's ETag at indexing
    time (None when the backend has none), checked on every read."""

    reader: Any
    etags: list


def tokenise_headers(headers: list[str], vocab: Vocab, with_header: bool) -> tuple[np.ndarray, np.ndarray]:
    """The CSR table of header tokens: ``(header_ptr [H+1], header_tok)``, int64 (one empty header without)."""
    toks = [encode_bytes(h.encode("utf-8"), vocab) for h in headers] if with_header else [np.zeros(0, np.int64)]
    ptr = np.zeros(len(toks) + 1, dtype=np.int64)
    np.cumsum([t.size for t in toks], out=ptr[1:])
    return ptr, np.concatenate(toks).astype(np.int64)


@dataclass(frozen=True)
class DocumentTable:
    """Per-document layout arrays (int64 unless noted) plus the unique header texts and tokens.

    The derived arrays (``header_len``, ``content_start``, ``content_len``, ``doc_len``) are computed
    once, on first use, and cached: the fetch path only indexes them.
    """

    vocab: Vocab
    paths: Sequence[str]      # [D] a PathList (any other sequence of str given is packed into one)
    doc_class: np.ndarray     # [D] class index
    doc_size: np.ndarray      # [D] bytes
    doc_header: np.ndarray    # [D] index into headers
    headers: list[str]        # [H] distinct normalised header texts
    header_ptr: np.ndarray    # [H+1]
    header_tok: np.ndarray    # [sum of header lengths]
    with_header: bool
    doc_mtime: np.ndarray = field(default_factory=lambda: _NO_MTIMES)  # [D] mtime (ns) at build; zeros when unknown
    packed: PackedTokens | None = None   # a packed store's tokens, or None: read the source files
    remote: RemoteFiles | None = None    # source files in object storage / over HTTP: read through fsspec
    doc_ident: np.ndarray | None = None  # [D, 2] (device, inode) at build time, checked on every read; None: unknown

    def __post_init__(self) -> None:
        if not isinstance(self.paths, PathList):
            object.__setattr__(self, "paths", PathList.of(list(self.paths)))
        if self.doc_mtime is _NO_MTIMES or self.doc_mtime is None:
            object.__setattr__(self, "doc_mtime", np.zeros(len(self.paths), dtype=np.int64))

    def __len__(self) -> int:
        return len(self.paths)

    @cached_property
    def header_len(self) -> np.ndarray:
        """Header tokens of each document (0 without headers: zeros that take no memory until written)."""
        return np.diff(self.header_ptr)[self.doc_header] if self.with_header else np.zeros(len(self), dtype=np.int64)

    @cached_property
    def content_start(self) -> np.ndarray:
        """Token position where each document's content begins (after header and SEP)."""
        return self.header_len + 1 if self.with_header else np.zeros(len(self), dtype=np.int64)

    @cached_property
    def content_len(self) -> np.ndarray:
        """Content tokens of each document (tail marker and padded tail included)."""
        return n_content_tokens(self.doc_size, self.vocab.n_bytes)

    @cached_property
    def doc_len(self) -> np.ndarray:
        """Total tokens of each document: header, SEP, content and EOF."""
        return self.content_start + self.content_len + 1

    def subset(self, ids: np.ndarray, new_class: np.ndarray) -> DocumentTable:
        """The documents ``ids`` (sorted), classes renumbered through ``new_class`` (old index -> new)."""
        packed = None if self.packed is None else replace(self.packed, doc_ptr=self.packed.doc_ptr[ids])
        remote = None if self.remote is None else replace(self.remote,
                                                          etags=[self.remote.etags[i] for i in ids.tolist()])
        mtime = self.doc_mtime
        return DocumentTable(vocab=self.vocab, paths=PathList.of([self.paths[i] for i in ids.tolist()]),
                             doc_class=new_class[self.doc_class[ids]], doc_size=self.doc_size[ids],
                             doc_header=self.doc_header[ids], headers=self.headers, header_ptr=self.header_ptr,
                             header_tok=self.header_tok, with_header=self.with_header, doc_mtime=mtime[ids],
                             packed=packed, remote=remote,
                             doc_ident=None if self.doc_ident is None else self.doc_ident[ids])

    def header_text(self, doc: int) -> str:
        """The normalised header text of one document."""
        return self.headers[int(self.doc_header[doc])]


def build_documents(paths: Sequence[str], doc_class, sizes, header_texts: list[str], vocab: Vocab,
                    with_header: bool, mtimes: np.ndarray | None = None,
                    identity: np.ndarray | None = None) -> DocumentTable:
    """Assemble a :class:`DocumentTable`: tokenise each distinct header once, point files at them."""
    headers = sorted(set(header_texts)) if with_header else [""]
    lookup = {h: i for i, h in enumerate(headers)}
    doc_header = np.fromiter((lookup[h] for h in header_texts), dtype=np.int64, count=len(header_texts)) \
        if with_header else np.zeros(len(paths), dtype=np.int64)
    header_ptr, header_tok = tokenise_headers(headers, vocab, with_header)
    return DocumentTable(vocab=vocab, paths=PathList.of(paths), doc_class=np.asarray(doc_class, dtype=np.int64),
                         doc_size=np.asarray(sizes, dtype=np.int64), doc_header=doc_header, headers=headers,
                         header_ptr=header_ptr, header_tok=header_tok, with_header=with_header,
                         doc_mtime=_NO_MTIMES if mtimes is None else np.asarray(mtimes, dtype=np.int64),
                         doc_ident=identity)
