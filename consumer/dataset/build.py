"""The build pipeline: every way of making a dataset ends in one :class:`Built` value.

``fps --normalise--> Corpus --stat--> file table --catalog/libmagic--> headers --> DocumentTable
--sampling--> SampleIndex``, with the index cache in front (a hit skips libmagic, the documents and
the index). The constructors of :class:`~consumer.Consumer` each call one function here and then
attach the result; none of them sets state by hand:

- :func:`build` — ``Consumer(fps, ...)``: files on disk, through the catalog and the index cache;
- :func:`build_packed` — ``Consumer.from_packed(prefix, ...)``: a packed store's documents;
- :func:`build_subset` — ``ds.where(...)``, ``ds.subset(...)``: some of a dataset's files, same tokens;
- :func:`~consumer.dataset.described.build_from_dict` — ``Consumer.from_dict(...)``: the dataset a
  ``get_dict(include_files=True)`` describes (through :func:`build`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._version import __version__
from ..catalog.catalog import CATALOG_NAME, Catalog
from ..catalog.content import source_computer
from ..catalog.duplicates import catalog_sha256s, dedupe_plan
from ..catalog.headers import headers_from
from ..errors import FileChangedError, InputError, short_repr
from ..scale import scan
from ..scale.engines import Engine, resolve_engine
from ..sources.base import ByteSource
from ..sources.corpus import Corpus
from ..sources.listing import check_bad_file_mode
from ..sources.open import reopen_source
from ..sources.paths import PathList
from ..spec import Spec, headers_already_made
from ..storage import Storage
from ..tokens.documents import DocumentTable, build_documents
from ..tokens.index import SampleIndex
from ..tokens.vocab import TokenVocab, Vocab
from ..util.sets import distinct
from ..util.validate import check_bool, check_class_to_id, int_vector
from .cache import building, file_table_sha256, load_entry
from .entry import index_key, sample_index, save_built
from .listed import list_corpus
from .on_parts import build_on_parts
from .ranks import torch_group
from .shared import build_once, fingerprint
from .store_index import recall_checks, record_checks, store_index

__all__ = ["Built", "build", "build_packed", "build_subset", "restore", "files_listing"]



@dataclass
class Built:
    """A built dataset: resolved settings, corpus, documents, sample index, and how it was made.

    ``info`` is ``Consumer.build_info``: ``cache`` ("hit", "miss", "off", "packed", "subset"), ``key``,
    ``libmagic_calls``, ``seconds``. ``catalog`` is the catalog a build opened (reused by SQL), if any.
    """

    spec: Spec
    corpus: Corpus
    documents: DocumentTable
    index: SampleIndex
    cache_root: str | None
    info: dict
    catalog: Catalog | None = None
    recipe: tuple = ()  # how to make it again in another process (see restore)
    files_digest: str | None = None  # get_dict()["files_sha256"], found once (dataset/export.py)


def _resolved(spec: Spec, index: SampleIndex, classes: list[str]) -> Spec:
    return spec.replace(resolved_seqlen=index.seqlen, class_to_id=check_class_to_id(spec.class_to_id, classes))


def _info(cache: str, key: str | None, magic_calls: int, t0: float, root: str | None = None) -> dict:
    """``build_info``: whether the entry was a hit or a miss (or none), its key and cache directory, the libmagic
    calls made and the seconds taken."""
    return {"cache": cache, "key": key, "cache_dir": root if key else None, "libmagic_calls": magic_calls,
            "seconds": time.perf_counter() - t0}


def build(fps: Any, spec: Spec, storage: Storage, *, verbose: bool = False, distributed: bool = True,
          engine: Any = None, on_bad_file: str = "raise") -> Built:
    """Normalise ``fps``, list every file, then load the sample index from the cache or build it (catalog,
    libmagic on new or changed files only, documents, index) and cache it. (The warning when ``seqlen="auto"``
    pads most of every row comes when rows are first made: :class:`~consumer.tokens.index.PaddingNotice`.)
    Where the bytes come from is the source
    :func:`~consumer.sources.open.open_source` picks (local files, or URLs listed, described from byte ranges and
    read through fsspec with ``storage``). With ``distributed`` and ``torch.distributed`` initialised, rank 0 alone
    builds; the other ranks open what it cached (:mod:`consumer.dataset.shared`; ``build_info["cache"]`` is
    ``"shared"`` there). ``engine`` (a ``dask.distributed.Client``, ``"dask"``, an executor:
    :func:`~consumer.scale.engines.resolve_engine`) runs stat, probe, libmagic and the content pass on its workers
    (each task holds its part of the source); the catalog, the cache entry and the samples are those of a local
    build (docs/scale-out.md). ``on_bad_file`` (``"raise"`` or ``"skip"``): what a directory scan does with broken
    symlinks, symlink loops, special and unreadable files (:mod:`consumer.sources.listing`)."""
    root = storage.cache_dir
    check_bad_file_mode(on_bad_file)
    engine = resolve_engine(engine)
    # nothing to share without an index cache (cache_dir=False, a callable metadata): every rank decides alike
    shareable = check_bool("distributed", distributed) and root is not None and not callable(spec.metadata)
    group = torch_group() if shareable else None
    if group is None:
        built = _build(fps, spec, storage, verbose, engine, on_bad_file)
    else:  # the dataset asked for (not where it is cached)
        request = fingerprint(fps, {**spec.to_dict(), "on_bad_file": on_bad_file}, __version__)
        built = build_once(group, request, root, lambda: _build(fps, spec, storage, verbose, engine, on_bad_file),
                           _publish, lambda handoff: _open_shared(handoff, spec, storage))
    return built


def _publish(built: Built) -> dict | None:
    """What other ranks need to open ``built`` from the index cache: its key, the source's handoff (e.g. the ETags
    of URLs), the dedupe report."""
    if built.info["cache"] not in ("hit", "miss") or not built.info["key"]:
        return None
    return {"key": built.info["key"], "source": built.documents.source.handoff(), "dedupe": built.info.get("dedupe")}


def _open_shared(handoff: dict, spec: Spec, storage: Storage) -> Built | None:
    """The dataset rank 0 built and cached (a warm reopen: no listing, no stat), or None if its entry is not here."""
    t0 = time.perf_counter()
    key, root = handoff.get("key"), storage.cache_dir
    entry = load_entry(root, key) if root and isinstance(key, str) else None
    if entry is None or not root or not isinstance(key, str):
        return None
    arrays, desc = entry
    paths = PathList.from_blob(arrays["paths"])
    corpus = Corpus.of(desc["classes"], paths, arrays["doc_class"], desc["form"])
    spec = spec.replace(class_to_id=check_class_to_id(spec.class_to_id, desc["classes"]))
    built = _from_entry(entry, spec, corpus, paths, root, key, t0)
    built.info.update(cache="shared", dedupe=handoff.get("dedupe"))
    docs = built.documents
    source = reopen_source(paths, docs.doc_size, docs.doc_mtime, handoff.get("source"), storage)
    return _with_source(built, source)


def _build(fps: Any, spec: Spec, storage: Storage, verbose: bool, engine: Engine | None = None,
           on_bad_file: str = "raise") -> Built:
    if spec.records.records:  # documents inside container files: their own listing and index (dataset/records.py)
        return _build_records(fps, spec, storage, verbose, engine)
    parts = None if engine is None else build_on_parts(fps, spec, storage, verbose, engine, on_bad_file)
    if parts is not None:  # a directory on a cluster: the workers wrote parts and the entry (dataset/on_parts.py)
        built = _from_entry(parts.entry, spec, parts.corpus, parts.paths, parts.cache_root, parts.key, parts.t0)
        built.info.update(parts.info)
        return _with_source(built, parts.source)
    with ExitStack() as hold:  # the claim on building the index entry, if one is taken (see _build_held)
        built = _build_held(fps, spec, storage, verbose, engine, hold, on_bad_file)
    return built


def _build_held(fps: Any, spec: Spec, storage: Storage, verbose: bool, engine: Engine | None,
                hold: ExitStack, on_bad_file: str = "raise") -> Built:
    """``_build`` with the index entry's claim held in ``hold``; over 80 lines: one pipeline read top to bottom."""
    t0 = time.perf_counter()
    cache_root = storage.cache_dir
    corpus, source, listing = list_corpus(fps, storage, engine, on_bad_file)
    listed = {} if listing is None else listing.report()
    classes = corpus.class_names
    spec = spec.replace(class_to_id=check_class_to_id(spec.class_to_id, classes))
    paths = source.paths
    cls = np.repeat(np.arange(len(classes), dtype=np.int64), [len(c.paths) for c in corpus.classes])
    sizes, mtimes = source.sizes, source.stamps
    catalog = None
    report = None
    if spec.dedupe == "content":
        catalog = Catalog(os.path.join(cache_root, CATALOG_NAME) if cache_root else None)
        plan = dedupe_plan(paths, [classes[c] for c in cls.tolist()],
                           catalog_sha256s(catalog, paths, sizes, mtimes, verbose=verbose,
                                           compute=source_computer(source) if engine is None else
                                           scan.content_computer(engine, source)), sizes)
        keep = plan.keep
        source = source.subset(keep)
        paths, cls, sizes, mtimes = source.paths, cls[keep], source.sizes, source.stamps
        kept = distinct(cls)
        corpus = Corpus.of(corpus.class_names, paths, cls, corpus.form)  # shares the blob of paths
        cls = np.searchsorted(kept, cls).astype(np.int64)
        classes = corpus.class_names
        report = plan.report()
    vocab = Vocab(spec.n_bytes)
    key = None
    if cache_root and not callable(spec.metadata):
        key = index_key(spec, classes, file_table_sha256(paths, cls, sizes, mtimes))
    entry = load_entry(cache_root, key, skip=("paths",)) if cache_root and key else None
    if entry is None and cache_root and key:  # of many processes missing it at once, one builds it, the others
        hold.enter_context(building(cache_root, key))  # wait here and then find it
        entry = load_entry(cache_root, key, skip=("paths",))
    if entry is not None and cache_root and key:
        built = _from_entry(entry, spec, corpus, paths, cache_root, key, t0)
        built.info.update(listed, dedupe=report)
        built.catalog = catalog
        return _with_source(built, source)
    if listing is not None:
        pass  # a directory scan: readability is proven at the first read (or by the scan's open, when skipping)
    elif engine is None:
        source.check_readable()  # readability proven by opening each file once (root included)
    else:
        scan.check_readable(engine, source)  # the same, on the engine's workers
    want = {"file": ("description",), "mime": ("mime",)}.get(spec.metadata, ()) \
        if isinstance(spec.metadata, str) else ()
    descriptions: list[str | None] = []
    mimes: list[str | None] = []
    if want:  # without libmagic columns the catalog is filled when a statement first needs it
        if catalog is None:
            catalog = Catalog(os.path.join(cache_root, CATALOG_NAME) if cache_root else None)
        describe = source.describe if engine is None else scan.describer(engine, source)
        descriptions, mimes = catalog.sync(paths, sizes, mtimes, want=want, verbose=verbose, describe=describe)
    headers = headers_from(spec.metadata, paths, descriptions, mimes)
    documents = build_documents(paths, cls, sizes, headers, vocab, with_header=spec.with_header, mtimes=mtimes,
                                source=source)
    index = sample_index(spec, documents, len(classes))
    spec = _resolved(spec, index, classes)
    built = Built(spec, corpus, documents, index, cache_root, _info("miss" if key else "off", key,
                                                                     catalog.magic_calls if catalog else 0, t0,
                                                                     cache_root), catalog)
    built.info.update(listed, dedupe=report)
    saved = cache_root and key and save_built(cache_root, key, spec, documents, index, classes, corpus.form)
    built.recipe = _recipe(built, ("cached", cache_root, key, spec, corpus.form) if saved else None)
    return built


def _build_records(fps: Any, spec: Spec, storage: Storage, verbose: bool, engine: Engine | None) -> Built:
    from .records import build_records  # noqa: PLC0415

    t0 = time.perf_counter()
    made, key = build_records(fps, spec, storage, verbose, engine)
    return _records_built(made, spec, storage.cache_dir, key, t0)


def _records_built(made: Any, spec: Spec, root: str | None, key: str | None, t0: float) -> Built:
    """The dataset a records build assembled (:class:`~consumer.dataset.records_entry.Assembled`); pickled as its
    entry in the index cache when it has one (a worker maps it), else as its arrays."""
    corpus, info = made.corpus(), dict(made.info)
    spec = _resolved(spec, made.index, corpus.class_names)
    built = Built(spec, corpus, made.documents, made.index, root,
                  {**_info(info.pop("cache"), None, info.pop("libmagic_calls"), t0), **info})
    built.recipe = ("records", root, key, spec, made.records.containers) if key else \
        ("arrays", spec, corpus, made.documents, made.index)
    return built


def _with_source(built: Built, source: ByteSource) -> Built:
    """``built`` reading its bytes from ``source`` (the files as listed now: device and inode, ETags)."""
    built.documents = replace(built.documents, source=source.with_paths(built.documents.paths))
    built.recipe = _recipe(built, built.recipe if built.recipe and built.recipe[0] == "cached" else None)
    return built


def _recipe(built: Built, cached: tuple | None) -> tuple:
    """How another process makes ``built`` again: from the index cache entry when there is one and its source
    reopens from it (local files), else the pickled arrays (with the source: e.g. the objects' ETags)."""
    if cached is not None and built.documents.source.handoff() is None:
        return cached
    return ("arrays", _picklable(built.spec), built.corpus, built.documents, built.index)


def _picklable(spec: Spec) -> Spec:
    """``spec`` with a callable ``metadata`` (a lambda would not pickle) replaced by a named stand-in."""
    return spec.replace(metadata=headers_already_made) if callable(spec.metadata) else spec


def _from_entry(entry: tuple[dict, dict], spec: Spec, corpus: Corpus, paths: PathList, cache_root: str, key: str,
                t0: float) -> Built:
    arrays, desc = entry
    documents = DocumentTable(
        vocab=Vocab(spec.n_bytes), paths=paths, doc_class=arrays["doc_class"], doc_size=arrays["doc_size"],
        doc_header=arrays["doc_header"], headers=desc["headers"], header_ptr=arrays["header_ptr"],
        header_tok=arrays["header_tok"], with_header=spec.with_header, doc_mtime=arrays["doc_mtime"])
    # sample_tokens: what the first fetch would compute over the index (older entries: computed)
    index = SampleIndex.from_entry(int(desc["seqlen"]), arrays, facts=desc.get("index_facts"))
    spec = _resolved(spec, index, corpus.class_names)
    return Built(spec, corpus, documents, index, cache_root, _info("hit", key, 0, t0, cache_root),
                 recipe=("cached", cache_root, key, spec, corpus.form))


def restore(recipe: tuple) -> Built:
    """The dataset a :attr:`Built.recipe` describes, made again (e.g. in a DataLoader worker): from the index
    cache entry (no stat, no libmagic), the packed store, the parent's recipe plus the file ids, or the
    pickled arrays themselves (datasets that were never cached)."""
    kind, *args = recipe
    t0 = time.perf_counter()
    if kind == "cached":
        cache_root, key, spec, form = args
        entry = load_entry(cache_root, key)
        if entry is None:
            raise InputError(f"cache_dir: the index cache entry {key[:16]}... under {cache_root!r} was removed or "
                             "damaged while the dataset was in use; build the dataset again")
        arrays, desc = entry
        paths = PathList.from_blob(arrays["paths"])
        corpus = Corpus.of(desc["classes"], paths, arrays["doc_class"], form)
        return _from_entry(entry, spec, corpus, paths, cache_root, key, t0)
    if kind == "packed":
        prefix, requested, stamp, storage = args
        if not isinstance(storage, Storage):  # a recipe pickled before 0.3: the loose settings
            storage = Storage.from_kwargs(storage, "from_packed")
        built = build_packed(prefix, requested, storage)
        if built.recipe[3] != stamp:  # re-packed since: never serve other tokens under the same sample ids
            raise FileChangedError(f"{prefix}: the packed store changed since this dataset was opened (its sidecar "
                                   "records other files or another token checksum); open it again")
        return built
    if kind == "records":
        from .records_entry import load_records  # noqa: PLC0415

        root, key, spec, containers = args
        made = load_records(root, key, containers, spec.records, spec.n_bytes)
        if made is None:
            raise InputError(f"cache_dir: the index cache entry {key[:16]}... under {root!r} was removed or "
                             "damaged while the dataset was in use; build the dataset again")
        made.info.update(cache="hit", libmagic_calls=0, index="hit")
        return _records_built(made, spec, root, key, t0)
    if kind == "subset":
        parent, file_ids = args
        return build_subset(restore(parent), file_ids)
    spec, corpus, documents, index = args
    return Built(spec, corpus, documents, index, None, _info("off", None, 0, t0), recipe=recipe)


def build_packed(prefix: Any, spec: Spec, storage: Storage, verify: bool = False) -> Built:
    """A dataset over the packed store at ``prefix``: its documents (tokens memory-mapped, or read by ranges
    from a store at a URL with ``storage``), the store's ``n_bytes`` and header mode, ``spec.class_to_id`` or the
    store's. ``verify`` first checks every token (checksum and id range, see
    :func:`~consumer.packed.verify.verify_packed`)."""
    from ..packed.open import check_lengths, load_store, open_store  # noqa: PLC0415  (the store modules load only when used)
    from ..packed.verify import verify_packed  # noqa: PLC0415

    t0 = time.perf_counter()
    loaded = load_store(prefix, storage, recall_checks(storage.cache_dir), spec.vocab_size)
    if verify:
        verify_packed(loaded)
    store, corpus, documents, metadata = open_store(loaded, lengths=False)
    where = "class_to_id" if spec.class_to_id is not None else f"class_to_id in {store.prefix}.consumer.json"
    vocab_size = store.vocab.n_tokens if isinstance(store.vocab, TokenVocab) else None  # a store another tool wrote
    class_to_id = check_class_to_id(store.sidecar["class_to_id"] if spec.class_to_id is None else spec.class_to_id,
                                    corpus.class_names, where)
    spec = spec.replace(n_bytes=store.vocab.n_bytes, metadata=metadata, vocab_size=vocab_size, class_to_id=class_to_id)
    requested = spec

    def checked_index() -> SampleIndex:  # an index entry (or the store's recorded check) says lengths were checked
        if store.checked is None:
            check_lengths(store, documents)
        return sample_index(spec, documents, len(corpus.classes))

    index, cached, key, digest = store_index(storage.cache_dir, store.identity, spec.key_dict(), documents,
                                             checked_index)
    record_checks(storage.cache_dir, store)
    info = {**_info("packed", None, 0, t0), "index": cached, "checks": "full" if store.checked is None else "recorded"}
    if key is not None:  # where the files' fingerprint is recorded once found (dataset/export.py)
        info["index_entry"] = [storage.cache_dir, key]
    stamp = (store.sidecar.get("tokens_sha256"), store.sidecar["files"])
    return Built(_resolved(spec, index, corpus.class_names), corpus, documents, index, None, info,
                 recipe=("packed", str(store.prefix), requested, stamp, storage), files_digest=digest)


def build_subset(parent: Built, file_ids: Any, catalog: Catalog | None = None) -> Built:
    """A dataset over some of ``parent``'s files (``file_id`` values): same settings and row width, the
    same tokens (nothing is re-read or re-described), its own sample index. It shares ``catalog`` (the
    parent's open catalog) if given."""
    t0 = time.perf_counter()
    docs = parent.documents
    file_ids = distinct(int_vector("file_ids", file_ids))
    if not file_ids.size or file_ids[0] < 0 or file_ids[-1] >= len(docs):
        raise InputError(f"file_ids must be non-empty and in [0, {len(docs)}), got {short_repr(file_ids.tolist())}")
    kept = distinct(docs.doc_class[file_ids])
    new_class = np.full(len(parent.corpus.classes), -1, dtype=np.int64)
    new_class[kept] = np.arange(kept.size)
    corpus = Corpus.of(parent.corpus.class_names, [docs.paths[i] for i in file_ids.tolist()],
                       docs.doc_class[file_ids], parent.corpus.form)
    documents = docs.subset(file_ids, new_class)
    spec = parent.spec.for_subset()
    index = sample_index(spec, documents, len(corpus.classes))
    return Built(_resolved(spec, index, corpus.class_names), corpus, documents, index, parent.cache_root,
                 _info("subset", None, 0, t0), catalog or parent.catalog, ("subset", parent.recipe, file_ids))


def files_listing(documents: DocumentTable, classes: list[str]) -> list[list]:
    """``[[path, size, class], ...]`` in corpus order (what ``get_dict(include_files=True)`` lists)."""
    return [[p, int(s), classes[int(c)]] for p, s, c in zip(documents.paths, documents.doc_size, documents.doc_class)]


def listing_sha256(listing: list[list]) -> str:
    """The fingerprint of a file listing (``get_dict()["files_sha256"]``)."""
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()
