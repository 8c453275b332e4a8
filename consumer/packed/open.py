"""Opening packed stores: validate every file against the sidecar, serve the tokens from memory maps.

:func:`open_packed` returns the corpus and a :class:`~consumer.tokens.documents.DocumentTable` whose ``source``
is the store (:class:`~consumer.sources.store.StoreFiles`, holding the memory-mapped tokens); :func:`inspect_packed`
summarises a store for ``consumer inspect``. The byte layout is in :mod:`consumer.packed.layout`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import FormatError, InputError
from ..formats.chunksums import ChunkVerifier
from ..sources.corpus import Corpus
from ..sources.open import locate_store
from ..sources.page_cache import wants_readahead
from ..sources.paths import PathList
from ..sources.store import StoreFiles, TokenData
from ..sources.token_store import MappedTokens, RangedTokens, TokenStore
from ..sources.version import versions_identity
from ..spec import headers_already_made
from ..storage import Storage
from ..tokens.documents import DocumentTable, StoreDocuments, tokenise_headers
from ..tokens.vocab import TokenVocab, Vocab, decode_ids
from ..util.validate import check_int
from .layout import FORMATS, as_prefix, check_file_sizes, read_sidecar_file, store_dtype, with_suffix
from .peer import is_peer_store, load_peer
from .sums import SUMS_SUFFIX, data_offset, load_verifier
from .table import read_table

__all__ = ["open_packed", "open_store", "read_sidecar", "inspect_packed", "load_store", "check_lengths", "Store",
           "Checked", "Recall"]

_WINDOW = 1 << 22  # documents checked at a time (bounded temporaries)


@dataclass(frozen=True)
class Checked:
    """What the full check of one version of a store found (its :attr:`Store.identity`), recorded by the caller
    (the index cache: :mod:`consumer.dataset.store_index`) so that a later open of the same version does nothing
    per document: each document's first token and length in the store, and whether the documents are grouped by
    class already."""

    starts: np.ndarray   # int64 [D]
    lengths: np.ndarray  # int64 [D] (int32 as the .idx of a store another tool wrote holds them)
    grouped: bool


Recall = Callable[[str], "Checked | None"]  # a store's identity -> its recorded check, or None


@dataclass(eq=False)
class Store:
    """A validated store, arrays in store order (``prefix`` a Path, or the URL of a store in object storage)."""

    prefix: Any
    sidecar: dict
    fmt: str
    vocab: Vocab
    paths: PathList         # [D] mapped from the file table (format 2)
    doc_class: np.ndarray   # int32 [D] (int64 from a format-1 table)
    doc_size: np.ndarray    # int64 [D]
    doc_header: np.ndarray  # int32 [D] (int64 from a format-1 table)
    lengths: np.ndarray     # int64 [D] tokens per document, from the store's own index
    starts: np.ndarray      # int64 [D] first token of each document in ``tokens``
    tokens: TokenStore      # memory-mapped or read by ranges; reads check the chunk sums (``tokens.verifier``)
    identity: str = ""      # sha256 of the sidecar and, for a local store, each file's inode, size and change time
    checked: Checked | None = None  # the recorded check this open relied on (None: it checked everything itself)
    grouped: bool | None = None     # documents grouped by class in store order (known once the store is opened)

    @property
    def verifier(self) -> ChunkVerifier | None:
        """The chunk verifier of the tokens (:mod:`consumer.packed.sums`), None for a store without sums."""
        return self.tokens.verifier

    def findings(self) -> Checked | None:
        """What this open found, to record for the store's version (None before :func:`open_store` grouped it)."""
        if self.grouped is None:
            return None
        lengths = np.asarray(self.lengths)  # int32 as a Megatron .idx holds them (a peer store's): half the bytes
        return Checked(np.asarray(self.starts, dtype=np.int64),
                       lengths if lengths.dtype == np.int32 else lengths.astype(np.int64, copy=False), self.grouped)


def load_store(prefix: Any, storage: Storage | None = None, recall: Recall | None = None,
               vocab_size: int | None = None) -> Store:
    """Open and check the store at ``prefix``: sidecar, file sizes, the format's index, the file table.

    ``prefix`` may be a URL (``s3://``, ``https://``, ...): its index files are copied once under the cache
    directory of ``storage`` (default: :meth:`Storage.of() <consumer.storage.Storage.of>`) and its tokens read by
    ranges with its fsspec options, through its read-through cache when set (see :mod:`consumer.packed.remote`).
    ``recall(identity)`` gives the recorded check of a local store's version, if any: then the sidecar, the
    files' sizes and every header are checked, and nothing per document (the open is O(1) in documents).
    A local prefix without a sidecar that holds a store another tool wrote opens as one (:mod:`.peer`), its ids
    a vocabulary of ``vocab_size`` (None: from its token dtype); ``vocab_size`` is refused for a store of ours."""
    storage = Storage.of() if storage is None else storage
    location = locate_store(prefix, storage)
    if location.kind == "local" and is_peer_store(as_prefix(location.where)):
        return Store(**load_peer(as_prefix(location.where), storage, vocab_size, recall))
    if location.kind == "local":
        store = _load_local(location.where, storage, recall)
    else:
        store = _load_objects(location.where, storage)
    if vocab_size is not None:
        raise InputError(f"vocab_size is for stores other tools wrote (no consumer sidecar); {str(store.prefix)!r} "
                         f"records its vocabulary ({store.vocab.size} ids), got vocab_size={vocab_size}")
    side = store.sidecar
    if store.checked is None and int(store.lengths.sum()) != side["tokens"]:
        raise FormatError(f"{store.prefix}: token count expected {side['tokens']} (sidecar 'tokens'), got "
                          f"{int(store.lengths.sum())} in the store")
    return store


def _load_local(local: Any, storage: Storage, recall: Recall | None = None) -> Store:
    """A store on a local file system: every file checked against the sidecar (each document too, unless a
    check of this version was recorded), tokens memory-mapped."""
    where = as_prefix(local)
    side = read_sidecar_file(where)
    files = check_file_sizes(where, side)
    fmt = side["store"]
    identity = versions_identity(side, [*files.values(), with_suffix(where, SUMS_SUFFIX)])
    checked = recall(identity) if recall is not None else None
    if checked is not None and fmt != "megatron":
        checked = None  # a .pbin's index is a pickle: read whole at every open, so checked at every open
    known = None if checked is None else (checked.starts, checked.lengths)
    tokens, starts, lengths = FORMATS[fmt].open(where, files, side, store_dtype(fmt, side["vocab_size"]),
                                                side["documents"], known)
    paths, doc_class, doc_size, doc_header = read_table(files["table"], side, checked is not None)
    verifier = load_verifier(where, side, tokens.itemsize, int(tokens.size) * tokens.itemsize)
    data_file = str(files["bin" if "bin" in files else "pbin"])
    readahead = wants_readahead(int(tokens.size) * tokens.itemsize, storage.readahead)
    return Store(where, side, fmt, Vocab(side["n_bytes"]), paths, doc_class, doc_size, doc_header, lengths,
                 np.asarray(starts, dtype=np.int64),
                 MappedTokens(tokens, verifier, data_file, data_offset(fmt), readahead=readahead),
                 identity, checked)


def _load_objects(url: str, storage: Storage) -> Store:
    """A store in object storage: its small files copied under the cache directory, tokens read by ranges."""
    from .remote import load_remote_store  # noqa: PLC0415  (fsspec loads only for URLs)

    side, paths, doc_class, doc_size, doc_header, tokens, starts, lengths, verifier = load_remote_store(url, storage)
    return Store(url, side, side["store"], Vocab(side["n_bytes"]), paths, doc_class, doc_size, doc_header, lengths,
                 np.asarray(starts, dtype=np.int64), RangedTokens(tokens, verifier), versions_identity(side, []))


def _class_order(doc_class: np.ndarray, classes: list[str], where: Any) -> np.ndarray | None:
    """The permutation grouping the store's documents by class, keeping the store's own order inside a class;
    None when they are grouped already (every store :func:`~consumer.packed.write.pack` writes): nothing to gather.
    FormatError for a class without a document."""
    grouped = all(bool((np.diff(doc_class[a:a + _WINDOW + 1]) >= 0).all()) for a in range(0, doc_class.size, _WINDOW))
    order = None if grouped else np.argsort(doc_class, kind="stable")
    present = np.bincount(doc_class if order is None else doc_class[order], minlength=len(classes))
    if (present == 0).any():
        c = int(np.argmax(present == 0))
        raise FormatError(f"{where}: class {classes[c]!r}: expected at least one document, got none")
    return order


def _gather(arr: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """``arr`` in corpus order: itself (a mapped view stays mapped) when the store is in that order."""
    return arr if order is None else arr[order]


def _open(prefix: Any, storage: Storage | None, check_lengths: bool = True) -> tuple[Store, Corpus, DocumentTable]:
    """The store (``prefix``, or a loaded :class:`Store`), its corpus and its documents (corpus order; tokens
    memory-mapped, or read by ranges for a store at a URL); ``check_lengths``: see :func:`check_lengths`."""
    store = prefix if isinstance(prefix, Store) else load_store(prefix, storage)
    side = store.sidecar
    classes: list[str] = side["classes"]
    peer = bool(side.get("peer"))  # one class: grouped
    order = None if peer or (store.checked is not None and store.checked.grouped) else \
        _class_order(store.doc_class, classes, store.prefix)
    store.grouped = order is None
    paths = store.paths if order is None else store.paths.gather(order)
    doc_class = _gather(store.doc_class, order)
    header_ptr, header_tok = tokenise_headers(side["headers"], store.vocab, side["with_header"])
    tokens = TokenData(tokens=store.tokens, doc_ptr=_gather(store.starts, order), store=store.fmt,
                       prefix=str(store.prefix))
    source = StoreFiles(tokens, paths, _gather(store.doc_size, order))
    fields = dict(vocab=store.vocab, paths=paths, doc_class=doc_class, doc_size=source.sizes,
                  doc_header=_gather(store.doc_header, order), headers=list(side["headers"]), header_ptr=header_ptr,
                  header_tok=header_tok, with_header=side["with_header"], source=source)
    docs = StoreDocuments(**fields, token_lengths=store.lengths) if peer else DocumentTable(**fields)
    if check_lengths and not peer:  # a store another tool wrote: its own lengths are the documents'
        _check_lengths(store, docs, order)
    corpus = Corpus.of(classes, paths, doc_class, "packed")
    return store, corpus, docs


def check_lengths(store: Store, docs: DocumentTable) -> None:
    """Every document's length in the store's own index equals the one its file table implies (size, header, SEP,
    EOF): FormatError naming the first that differs, expected vs actual. An open does it unless the check was
    made and recorded for this version of the store (its index cache entry, :mod:`consumer.dataset.store_index`)."""
    if store.sidecar.get("peer"):
        return  # a store another tool wrote: its own lengths are the documents' (and its one class needs no order)
    _check_lengths(store, docs, _class_order(store.doc_class, store.sidecar["classes"], store.prefix))


def _check_lengths(store: Store, docs: DocumentTable, order: np.ndarray | None) -> None:
    actual = _gather(store.lengths, order)
    for a in range(0, len(docs), _WINDOW):  # a window at a time: no temporary of the documents' size
        expected = docs.content_start[a:a + _WINDOW] + docs.content_len[a:a + _WINDOW] + 1
        bad = expected != actual[a:a + _WINDOW]
        if bad.any():
            i = a + int(np.argmax(bad))
            raise FormatError(
                f"{store.prefix}: document {i if order is None else int(order[i])} of the store "
                f"({docs.paths[i]!r}): length expected {int(expected[i - a])} tokens (from its size "
                f"{int(docs.doc_size[i])} bytes and header), got {int(actual[i])} in the store")


def open_packed(prefix, **remote: Any) -> tuple[Corpus, DocumentTable, str | None]:
    """Open and validate the packed store at ``prefix``: ``(corpus, documents, metadata)``.

    The format (``.bin/.idx`` or ``.pbin``) is the one the sidecar names, and its files must be present
    with the exact sizes it recorded. Checked: sidecar fields, dtype, document count, one sequence per
    document, the file table, and every document's length against the ``DocumentTable``'s ``doc_len``
    (FormatError naming the first bad document, expected vs actual). ``corpus`` and ``documents`` are
    in corpus order (classes by name, paths sorted) whatever the store order (merged stores), and
    ``documents.source.tokens`` holds zero-copy memory-mapped tokens
    (:class:`~consumer.sources.store.TokenData`). ``metadata`` is the header mode recorded at pack time
    (``"file"``, ``"mime"``, ``None`` or ``"callable"``).
    Source files are never opened. InputError if there is no store at ``prefix`` at all. A URL ``prefix``
    takes ``storage_options``, ``cache_dir`` and ``remote_cache`` (see :func:`load_store`).
    """
    store, corpus, docs = _open(prefix, Storage.from_kwargs(remote, "open_packed"))
    return corpus, docs, store.sidecar["metadata"]


def open_store(prefix: Any, storage: Storage | None = None, lengths: bool = True
               ) -> tuple[Store, Corpus, DocumentTable, Any]:
    """:func:`open_packed` plus the validated store (sidecar included), with the header mode as a
    ``Spec`` accepts it (a store packed with a callable gets :func:`~consumer.spec.headers_already_made`).
    ``prefix`` may be a :class:`Store` already loaded. ``lengths=False`` leaves :func:`check_lengths` to the
    caller (who runs it unless it was recorded for this version of the store)."""
    store, corpus, docs = _open(prefix, storage, lengths)
    metadata = store.sidecar["metadata"]
    return store, corpus, docs, headers_already_made if metadata == "callable" else metadata


def _no_tokens(prefix: Any) -> Any:
    """The ``files`` way of a store's ``choose``: never taken (a store's documents are its tokens)."""
    def refuse(_: Any) -> Any:
        raise FormatError(f"{prefix}: opened without tokens")
    return refuse


def read_sidecar(prefix) -> dict:
    """The checked sidecar of the store at ``prefix`` (a dict, see :mod:`consumer.packed.layout`), without
    opening the store itself: e.g. ``read_sidecar(p)["class_to_id"]`` to reuse the packing run's ids.
    Raises like :func:`open_packed` for a missing or malformed sidecar."""
    return read_sidecar_file(as_prefix(prefix))


def inspect_packed(prefix, preview_tokens: int = 64, **remote: Any) -> dict:
    """A validated summary of the store at ``prefix``, for ``consumer inspect``.

    Keys: prefix, format, dtype, documents, tokens, n_bytes, vocab_size, metadata, with_header,
    classes (``{class: documents}``), class_to_id, files (``{kind: {name, size}}``), consumer_version
    (of the writer) and ``preview``: the first document in corpus order (path, class, header, token
    count, its first ``preview_tokens`` ids and their decoding with ``<SEP>``-style tags). A URL ``prefix``
    takes ``storage_options`` and ``cache_dir`` (see :func:`load_store`).
    """
    check_int("preview_tokens", preview_tokens, 0)
    store, corpus, docs = _open(prefix, Storage.from_kwargs(remote, "inspect_packed"))
    side = store.sidecar
    n = min(int(docs.doc_len[0]), int(preview_tokens))
    ids = docs.source.choose(files=_no_tokens(store.prefix),
                             store=lambda t: t.tokens.read(int(t.doc_ptr[0]), n).astype(np.int64))
    text = None if isinstance(docs.vocab, TokenVocab) else \
        decode_ids(ids, docs.vocab, specials="tags").decode("utf-8", errors="backslashreplace")
    return {
        "prefix": str(store.prefix),
        "format": store.fmt,
        "dtype": side["dtype"],
        "documents": len(docs),
        "tokens": side["tokens"],
        "n_bytes": side["n_bytes"],
        "vocab_size": side["vocab_size"],
        "metadata": side["metadata"],
        "with_header": side["with_header"],
        "classes": {c.name: len(c.paths) for c in corpus.classes},
        "class_to_id": dict(side["class_to_id"]),
        "files": {k: dict(v) for k, v in side["files"].items()},
        "consumer_version": side.get("consumer_version"),
        "spec": side.get("spec"),
        "preview": {
            "path": docs.paths[0],
            "class": corpus.classes[int(docs.doc_class[0])].name,
            "header": docs.header_text(0) if docs.with_header else None,
            "tokens": int(docs.doc_len[0]),
            "ids": ids.tolist(),
            "text": text,
        },
    }
