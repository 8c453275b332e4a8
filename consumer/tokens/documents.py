"""The document table: per file, where its header, SEP, content and EOF sit in its token stream.

A document is ``[header tokens] SEP [content tokens] EOF`` (``metadata=None``: ``[content] EOF``).
Content tokens follow the lossless tail rule of :mod:`consumer.tokens.vocab`: ``nfull`` full tokens, then,
when the size is not a multiple of ``n_bytes``, ``TAIL_k`` and one padded token.

Headers repeat a lot (a corpus has few distinct file types), so they are stored once each in a
small CSR table (``header_ptr`` / ``header_tok``) and every file points at one (``doc_header``).
Everything is a flat numpy array; paths are kept in one :class:`~consumer.sources.paths.PathList` (a packed
blob, not 10^7 ``str`` objects).

Where the bytes come from is ``source``, one :class:`~consumer.sources.base.ByteSource` (local files, objects
behind URLs, a packed store): the reader builds documents from the files' bytes, or copies a packed store's
ready-made tokens (``source.tokens``, a :class:`~consumer.sources.store.TokenData`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..sources.base import ByteSource
from ..sources.local import LocalFiles
from ..sources.paths import PathList
from ..sources.store import StoreFiles, TokenData
from .vocab import Vocab, encode_bytes, n_content_tokens

__all__ = ["DOC_ARRAYS", "DocumentTable", "StoreDocuments", "build_documents", "tokenise_headers"]

# the per-document arrays of a DocumentTable that the index cache stores (beside the paths and header texts)
DOC_ARRAYS = ("doc_class", "doc_size", "doc_header", "header_ptr", "header_tok", "doc_mtime")


_NO_MTIMES = np.zeros(0, dtype=np.int64)  # "not given": replaced by zeros, one per document


PackedTokens = TokenData  # the name before 0.3 (pickles of packed datasets made by 0.2 name it)


@dataclass(frozen=True, eq=False)
class RemoteFiles:
    """Only for unpickling datasets over URLs pickled before 0.3 (now
    :class:`~consumer.sources.objects.ObjectFiles`)."""

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
    doc_class: np.ndarray     # [D] class index (int32 from a records build, else int64)
    doc_size: np.ndarray      # [D] bytes
    doc_header: np.ndarray    # [D] index into headers (int32)
    headers: list[str]        # [H] distinct normalised header texts
    header_ptr: np.ndarray    # [H+1]
    header_tok: np.ndarray    # [sum of header lengths]
    with_header: bool
    doc_mtime: np.ndarray = field(default_factory=lambda: _NO_MTIMES)  # [D] mtime (ns) at build; zeros when unknown
    source: ByteSource = None  # type: ignore[assignment]  # where the bytes come from; None: the local files named

    def __post_init__(self) -> None:
        if not isinstance(self.paths, PathList):
            object.__setattr__(self, "paths", PathList.of(list(self.paths)))
        if self.doc_mtime is _NO_MTIMES or self.doc_mtime is None:
            object.__setattr__(self, "doc_mtime", np.zeros(len(self.paths), dtype=np.int64))
        if self.source is None:
            object.__setattr__(self, "source", LocalFiles(self.paths, self.doc_size, self.doc_mtime))

    def __setstate__(self, state: dict) -> None:
        """Unpickle, also a table pickled before 0.3 (its ``packed`` / ``remote`` / ``doc_ident`` fields become
        its ``source``)."""
        if "source" not in state:
            state = dict(state)
            packed, remote, ident = state.pop("packed", None), state.pop("remote", None), state.pop("doc_ident", None)
            paths, sizes, stamps = state["paths"], state["doc_size"], state["doc_mtime"]
            if packed is not None:
                state["source"] = StoreFiles(packed, paths, sizes)
            elif remote is not None:
                from ..sources.objects import ObjectFiles  # noqa: PLC0415  (fsspec loads only for URLs)

                state["source"] = ObjectFiles(remote.reader, paths, sizes, stamps, remote.etags)
            else:
                state["source"] = LocalFiles(paths, sizes, stamps, ident)
        self.__dict__.update(state)

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
        source = self.source.subset(ids)  # sizes and stamps: one copy, shared with the source
        return DocumentTable(vocab=self.vocab, paths=source.paths,
                             doc_class=new_class[self.doc_class[ids]], doc_size=source.sizes,
                             doc_header=self.doc_header[ids], headers=self.headers, header_ptr=self.header_ptr,
                             header_tok=self.header_tok, with_header=self.with_header,
                             doc_mtime=source.stamps,
                             source=source)

    def header_text(self, doc: int) -> str:
        """The normalised header text of one document."""
        return self.headers[int(self.doc_header[doc])]


@dataclass(frozen=True)
class StoreDocuments(DocumentTable):
    """The documents of a store another tool wrote (:mod:`consumer.packed.peer`): each one is its tokens as stored
    (``token_lengths`` of them), with no header, no SEP and no EOF of ours; ``doc_size`` is its token count."""

    token_lengths: np.ndarray = field(default_factory=lambda: _NO_MTIMES)  # [D] tokens of each document

    @cached_property
    def header_len(self) -> np.ndarray:
        """Zeros: no header (pages never written take no memory)."""
        return np.zeros(len(self), dtype=np.int64)

    @cached_property
    def content_start(self) -> np.ndarray:
        """Zeros: every token of a document is content."""
        return np.zeros(len(self), dtype=np.int64)

    @cached_property
    def content_len(self) -> np.ndarray:
        """The document's tokens as stored."""
        return self.token_lengths

    @cached_property
    def doc_len(self) -> np.ndarray:
        """The document's tokens as stored: nothing is added."""
        return self.token_lengths

    def subset(self, ids: np.ndarray, new_class: np.ndarray) -> StoreDocuments:
        """The documents ``ids`` (sorted), classes renumbered through ``new_class`` (old index -> new)."""
        base = DocumentTable.subset(self, ids, new_class)
        return StoreDocuments(**{f: getattr(base, f) for f in _FIELDS}, token_lengths=self.token_lengths[ids])


_FIELDS = ("vocab", "paths", "doc_class", "doc_size", "doc_header", "headers", "header_ptr", "header_tok",
           "with_header", "doc_mtime", "source")


def _class_codes(doc_class: Any) -> np.ndarray:
    """``doc_class`` as int32 when given so (a records build: 4 bytes a document), else as int64."""
    a = np.asarray(doc_class)
    return a if a.dtype == np.int32 else a.astype(np.int64, copy=False)


def build_documents(paths: Sequence[str], doc_class, sizes, header_texts: list[str], vocab: Vocab,
                    with_header: bool, mtimes: np.ndarray | None = None,
                    source: ByteSource | None = None) -> DocumentTable:  # None: the local files named
    """Assemble a :class:`DocumentTable`: tokenise each distinct header once, point files at them."""
    headers = sorted(set(header_texts)) if with_header else [""]
    lookup = {h: i for i, h in enumerate(headers)}
    # int32 (few distinct headers); all zeros without headers: pages never written take no memory
    doc_header = np.fromiter((lookup[h] for h in header_texts), dtype=np.int32, count=len(header_texts)) \
        if with_header else np.zeros(len(paths), dtype=np.int32)
    header_ptr, header_tok = tokenise_headers(headers, vocab, with_header)
    return DocumentTable(vocab=vocab, paths=PathList.of(paths), doc_class=_class_codes(doc_class),
                         doc_size=np.asarray(sizes, dtype=np.int64), doc_header=doc_header, headers=headers,
                         header_ptr=header_ptr, header_tok=header_tok, with_header=with_header,
                         doc_mtime=_NO_MTIMES if mtimes is None else np.asarray(mtimes, dtype=np.int64),
                         source=source)  # type: ignore[arg-type]
