"""The build pipeline: every way of making a dataset ends in one :class:`Built` value.

``fps --normalise--> Corpus --stat--> file table --catalog/libmagic--> headers --> DocumentTable
--sampling--> SampleIndex``, with the index cache in front (a hit skips libmagic, the documents and
the index). The constructors of :class:`~consumer.Consumer` each call one function here and then
attach the result; none of them sets state by hand:

- :func:`build` — ``Consumer(fps, ...)``: files on disk, through the catalog and the index cache;
- :func:`build_packed` — ``Consumer.from_packed(prefix, ...)``: a packed store's documents;
- :func:`build_subset` — ``ds.where(...)``, ``ds.subset(...)``: some of a dataset's files, same tokens;
- :func:`build_from_dict` — ``Consumer.from_dict(...)``: the dataset a ``get_dict(include_files=True)`` describes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._version import __version__
from ..catalog.catalog import CATALOG_NAME, Catalog
from ..catalog.duplicates import catalog_sha256s, dedupe_plan
from ..catalog.headers import HEADER_RULES_VERSION, MAX_HEADER_BYTES, headers_from
from ..errors import ConsumerError, FileChangedError, InputError, RemoteError, short_repr
from ..scale import scan
from ..scale.engines import Engine, resolve_engine
from ..sources.corpus import Corpus, normalise, probe_files, stat_files
from ..sources.magic import libmagic_version
from ..sources.paths import PathList
from ..sources.urls import class_layout, is_url, list_objects, local_path_of, stat_objects
from ..spec import Metadata, Spec, headers_already_made
from ..storage import check_cache_dir
from ..tokens.documents import DocumentTable, RemoteFiles, build_documents
from ..tokens.index import AUTO_SEQLEN_CAP, SampleIndex, warn_if_padded
from ..tokens.vocab import Vocab
from ..util.validate import check_bool, check_class_to_id, int_vector
from .cache import cache_key, file_table_sha256, load_entry, save_entry
from .ranks import torch_group
from .shared import build_once, fingerprint

__all__ = ["Built", "build", "build_packed", "build_subset", "build_from_dict", "restore", "files_listing"]

_DOC_ARRAYS = ("doc_class", "doc_size", "doc_header", "header_ptr", "header_tok", "doc_mtime")
_INDEX_ARRAYS = ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr")


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


def _index(spec: Spec, documents: DocumentTable, n_classes: int) -> SampleIndex:
    return spec.sampling.build(documents.doc_len, documents.doc_class, n_classes, style=spec.style,
                               seqlen=spec.seqlen, long_files=spec.long_files, seed=spec.seed)


def _resolved(spec: Spec, index: SampleIndex, classes: list[str]) -> Spec:
    return spec.replace(resolved_seqlen=index.seqlen, class_to_id=check_class_to_id(spec.class_to_id, classes))


def _info(cache: str, key: str | None, magic_calls: int, t0: float) -> dict:
    return {"cache": cache, "key": key, "libmagic_calls": magic_calls, "seconds": time.perf_counter() - t0}


def build(fps: Any, spec: Spec, *, cache_dir: Any = None, verbose: bool = False,
          storage_options: dict | None = None, remote_cache: Any = None, distributed: bool = True,
          engine: Any = None) -> Built:
    """Normalise ``fps``, stat every file, then load the sample index from the cache or build it (catalog,
    libmagic on new or changed files only, documents, index) and cache it. Warns (``ConsumerWarning``)
    when ``seqlen="auto"`` pads most of every row. URLs (``s3://``, ``https://``, ...) are listed, described
    from byte ranges and read through fsspec with ``storage_options``; ``remote_cache`` (e.g. ``"20GB"``)
    keeps a bounded read-through copy of their bytes under the cache directory. With ``distributed`` and
    ``torch.distributed`` initialised, rank 0 alone builds; the other ranks open what it cached
    (:mod:`consumer.dataset.shared`; ``build_info["cache"]`` is ``"shared"`` there). ``engine`` (a
    ``dask.distributed.Client``, ``"dask"``, an executor: :func:`~consumer.scale.engines.resolve_engine`) runs
    stat, probe, libmagic and the content pass on its workers (URLs: libmagic from the byte ranges the workers
    read); the catalog, the cache entry and the samples are those of a local build (docs/scale-out.md)."""
    root = check_cache_dir(cache_dir)
    engine = resolve_engine(engine)
    # nothing to share without an index cache (cache_dir=False, a callable metadata): every rank decides alike
    shareable = check_bool("distributed", distributed) and root is not None and not callable(spec.metadata)
    group = torch_group() if shareable else None
    if group is None:
        built = _build(fps, spec, cache_dir, verbose, storage_options, remote_cache, engine)
    else:
        request = fingerprint(fps, spec.to_dict(), __version__)  # the dataset asked for (not where it is cached)
        built = build_once(group, request, root, lambda: _build(fps, spec, cache_dir, verbose, storage_options,
                                                                 remote_cache, engine),
                           _publish, lambda handoff: _open_shared(handoff, spec, root, storage_options, remote_cache))
    warn_if_padded(spec.seqlen, spec.style, built.index)
    return built


def _publish(built: Built) -> dict | None:
    """What other ranks need to open ``built`` from the index cache: its key, the ETags of URLs, the dedupe report."""
    if built.info["cache"] not in ("hit", "miss") or not built.info["key"]:
        return None
    remote = built.documents.remote
    return {"key": built.info["key"], "etags": None if remote is None else list(remote.etags),
            "dedupe": built.info.get("dedupe")}


def _open_shared(handoff: dict, spec: Spec, root: str | None, storage_options: dict | None,
                 remote_cache: Any) -> Built | None:
    """The dataset rank 0 built and cached (a warm reopen: no listing, no stat), or None if its entry is not here."""
    t0 = time.perf_counter()
    key = handoff.get("key")
    entry = load_entry(root, key) if root and isinstance(key, str) else None
    if entry is None or not root or not isinstance(key, str):
        return None
    arrays, desc = entry
    paths = PathList.from_blob(arrays["paths"])
    corpus = Corpus.of(desc["classes"], paths, arrays["doc_class"], desc["form"])
    spec = spec.replace(class_to_id=check_class_to_id(spec.class_to_id, desc["classes"]))
    built = _from_entry(entry, spec, corpus, paths, root, key, t0)
    built.info.update(cache="shared", dedupe=handoff.get("dedupe"))
    etags = handoff.get("etags")
    return built if etags is None else _with_remote(built, _reader(storage_options, root, remote_cache), etags)


def _build(fps: Any, spec: Spec, cache_dir: Any, verbose: bool, storage_options: dict | None,
           remote_cache: Any, engine: Engine | None = None) -> Built:
    t0 = time.perf_counter()
    cache_root = check_cache_dir(cache_dir)
    if is_url(fps) and local_path_of(fps) is None:  # a bucket prefix: sub-prefixes are classes, one listing
        fps = class_layout(list_objects(fps, storage_options))
    corpus = normalise(fps)
    classes = corpus.class_names
    spec = spec.replace(class_to_id=check_class_to_id(spec.class_to_id, classes))
    paths, cls_list = corpus.flat()
    cls = np.asarray(cls_list, dtype=np.int64)
    if spec.dedupe == "content" and any(is_url(p) for p in paths):
        raise InputError("dedupe='content' reads every byte of local files; fps holds URLs (dedupe them locally "
                         "or drop the setting)")
    remote = _remote(paths, storage_options, cache_root, remote_cache)
    identity = None if remote else np.zeros((len(paths), 2), dtype=np.int64)
    # no open per file yet (size-0 files excepted): a cache hit needs none, a miss probes them below
    if remote:
        sizes, mtimes = remote[1].sizes, remote[1].mtimes_ns
    elif engine is None:
        sizes, mtimes = stat_files(paths, [classes[c] for c in cls_list], identity=identity,
                                   check_open=np.zeros(len(paths), dtype=bool))
    else:  # the same on the engine's workers (scale.tasks.stat_task)
        sizes, mtimes = scan.stat_paths(engine, paths, [classes[c] for c in cls_list], identity)
    catalog = None
    report = None
    if spec.dedupe == "content":
        catalog = Catalog(os.path.join(cache_root, CATALOG_NAME) if cache_root else None)
        plan = dedupe_plan(paths, [classes[c] for c in cls_list],
                           catalog_sha256s(catalog, paths, sizes, mtimes, verbose=verbose,
                                           compute=None if engine is None else scan.content_computer(engine)), sizes)
        keep = plan.keep
        paths, cls, sizes, mtimes = PathList.of([paths[i] for i in keep.tolist()]), cls[keep], sizes[keep], mtimes[keep]
        identity = None if identity is None else identity[keep]
        kept = np.unique(cls)
        corpus = Corpus.of(corpus.class_names, paths, cls, corpus.form)  # shares the blob of paths
        cls = np.searchsorted(kept, cls).astype(np.int64)
        classes = corpus.class_names
        report = plan.report()
    vocab = Vocab(spec.n_bytes)
    key = None
    if cache_root and not callable(spec.metadata):
        key = cache_key({**spec.key_dict(), "max_header_bytes": MAX_HEADER_BYTES, "header_rules": HEADER_RULES_VERSION,
                         "auto_seqlen_cap": AUTO_SEQLEN_CAP,
                         "consumer_version": __version__, "classes": classes,
                         "libmagic": libmagic_version() if spec.metadata else None,
                         "files_sha256": file_table_sha256(paths, cls, sizes, mtimes)})
    entry = load_entry(cache_root, key, skip=("paths",)) if cache_root and key else None
    if entry is not None and cache_root and key:
        built = _from_entry(entry, spec, corpus, paths, cache_root, key, t0)
        built.info["dedupe"], built.catalog = report, catalog
        if identity is not None:
            built.documents = replace(built.documents, doc_ident=identity)
        return _with_remote(built, remote[0], remote[1].etags) if remote else built
    if not remote and engine is None:
        probe_files(paths, sizes)  # readability proven by opening each file once (root included)
    elif not remote and engine is not None:
        scan.probe_paths(engine, paths, sizes)
    if catalog is None:
        catalog = Catalog(os.path.join(cache_root, CATALOG_NAME) if cache_root else None)
    want = {"file": ("description",), "mime": ("mime",)}.get(spec.metadata, ()) \
        if isinstance(spec.metadata, str) else ()
    if remote:  # objects: libmagic from byte ranges, here or read by the workers (the client listed them once)
        describe = remote[2] if engine is None else scan.object_describer(
            engine, remote[1].urls, remote[1].sizes, remote[1].etags, storage_options)
    else:
        describe = None if engine is None else scan.describer(engine)
    descriptions, mimes = catalog.sync(paths, sizes, mtimes, want=want, verbose=verbose, describe=describe)
    headers = headers_from(spec.metadata, paths, descriptions, mimes)
    documents = build_documents(paths, cls, sizes, headers, vocab, with_header=spec.with_header, mtimes=mtimes,
                                identity=identity)
    index = _index(spec, documents, len(classes))
    spec = _resolved(spec, index, classes)
    built = Built(spec, corpus, documents, index, cache_root, _info("miss" if key else "off", key,
                                                                     catalog.magic_calls, t0), catalog)
    built.info["dedupe"] = report
    arrays = {**{k: getattr(documents, k) for k in _DOC_ARRAYS}, **{k: getattr(index, k) for k in _INDEX_ARRAYS},
              "paths": PathList.of(paths).packed()}  # the blob the paths are kept in (no copy)
    saved = cache_root and key and save_entry(
        cache_root, key, arrays,
        {"spec": spec.key_dict(), "seqlen": index.seqlen, "headers": documents.headers, "classes": classes,
         "form": corpus.form, "files": len(documents), "samples": len(index)})
    built.recipe = ("cached", cache_root, key, spec, corpus.form) if saved else (
        "arrays", _picklable(spec), corpus, documents, index)
    return _with_remote(built, remote[0], remote[1].etags) if remote else built


def _may_hold_urls(paths: Sequence[str]) -> bool:
    """False when no path can be a URL: a packed path list without "://" in its bytes (searched a window at
    a time, no copy of the whole blob), saving a per-path check on large local corpora."""
    if not isinstance(paths, PathList):
        return True
    blob, step = paths.packed(), 1 << 24
    return any(b"://" in blob[i:i + step + 2].tobytes() for i in range(0, blob.size, step))


def _remote(paths: Sequence[str], storage_options: dict | None, cache_root: str | None, remote_cache: Any):
    """``(reader, listing, describe)`` when ``paths`` are URLs (None for local files): one listing gives sizes,
    mtimes and ETags; ``describe`` runs libmagic on byte ranges of the objects."""
    urls = [is_url(p) for p in paths] if _may_hold_urls(paths) else []
    if not any(urls):
        if storage_options is not None or remote_cache is not None:
            raise InputError("storage_options / remote_cache are for URLs (s3://, https://, ...); fps holds local "
                             "paths")
        return None
    if not all(urls):
        local = paths[urls.index(False)]
        raise InputError(f"fps mixes URLs and local paths (e.g. {local!r}); build one dataset per kind")
    from ..sources.object_magic import describer  # noqa: PLC0415  (fsspec loads only for URLs)

    reader = _reader(storage_options, cache_root, remote_cache)
    try:
        listing = stat_objects(paths, storage_options)
    except ConsumerError:
        raise
    except OSError as e:  # connection refused, DNS, TLS: the backend's own exception types are OSErrors
        raise RemoteError(f"fps: cannot list the objects (e.g. {paths[0]!r}): {type(e).__name__}: {e}") from e
    return reader, listing, describer(reader, listing.urls, listing.sizes, listing.etags)


def _reader(storage_options: dict | None, cache_root: str | None, remote_cache: Any) -> Any:
    """The range reader of a dataset over URLs (read-through cache under ``cache_root`` with ``remote_cache``)."""
    from ..sources.range_reader import RemoteReader  # noqa: PLC0415  (fsspec loads only for URLs)

    if remote_cache is not None and cache_root is None:
        raise InputError("remote_cache needs a cache_dir (it lives there); got cache_dir=False")
    return RemoteReader(storage_options, cache_dir=os.path.join(cache_root, "remote") if remote_cache and cache_root
                        else None, cache_bytes=remote_cache)


def _with_remote(built: Built, reader: Any, etags: list) -> Built:
    """Attach the remote reader (and the ETags read at indexing time) to a dataset over URLs."""
    built.documents = replace(built.documents, remote=RemoteFiles(reader, list(etags)))
    built.recipe = ("arrays", _picklable(built.spec), built.corpus, built.documents, built.index)
    return built


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
    index = SampleIndex(seqlen=int(desc["seqlen"]), **{k: arrays[k] for k in _INDEX_ARRAYS})
    spec = _resolved(spec, index, corpus.class_names)
    return Built(spec, corpus, documents, index, cache_root, _info("hit", key, 0, t0),
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
        prefix, requested, stamp, remote = args
        built = build_packed(prefix, requested, **remote)
        if built.recipe[3] != stamp:  # re-packed since: never serve other tokens under the same sample ids
            raise FileChangedError(f"{prefix}: the packed store changed since this dataset was opened (its sidecar "
                                   "records other files or another token checksum); open it again")
        return built
    if kind == "subset":
        parent, file_ids = args
        return build_subset(restore(parent), file_ids)
    spec, corpus, documents, index = args
    return Built(spec, corpus, documents, index, None, _info("off", None, 0, t0), recipe=recipe)


def build_packed(prefix: Any, spec: Spec, verify: bool = False, **remote: Any) -> Built:
    """A dataset over the packed store at ``prefix``: its documents (tokens memory-mapped, or read by ranges
    from a store at a URL: ``remote`` holds ``storage_options``, ``cache_dir``, ``remote_cache``), the store's
    ``n_bytes`` and header mode, ``spec.class_to_id`` or the store's. ``verify`` first checks every token
    (checksum and id range, see :func:`~consumer.packed.verify.verify_packed`)."""
    from ..packed.open import load_store, open_store  # noqa: PLC0415  (the store modules load only when used)
    from ..packed.verify import verify_packed  # noqa: PLC0415

    t0 = time.perf_counter()
    unknown = sorted(set(remote) - {"storage_options", "cache_dir", "remote_cache"})
    if unknown:
        raise InputError(f"from_packed got unexpected options {unknown}; a store at a URL takes storage_options, "
                         "cache_dir and remote_cache")
    remote = {k: v for k, v in remote.items() if v is not None}
    loaded = load_store(prefix, **remote)
    if verify:
        verify_packed(loaded)
    store, corpus, documents, metadata = open_store(loaded)
    where = "class_to_id" if spec.class_to_id is not None else f"class_to_id in {store.prefix}.consumer.json"
    spec = spec.replace(n_bytes=store.vocab.n_bytes, metadata=metadata, class_to_id=check_class_to_id(
        store.sidecar["class_to_id"] if spec.class_to_id is None else spec.class_to_id, corpus.class_names, where))
    requested = spec
    index = _index(spec, documents, len(corpus.classes))
    warn_if_padded(spec.seqlen, spec.style, index)
    return Built(_resolved(spec, index, corpus.class_names), corpus, documents, index, None,
                 _info("packed", None, 0, t0), recipe=("packed", str(store.prefix), requested,
                                                       (store.sidecar.get("tokens_sha256"), store.sidecar["files"]),
                                                       remote))


def build_subset(parent: Built, file_ids: Any, catalog: Catalog | None = None) -> Built:
    """A dataset over some of ``parent``'s files (``file_id`` values): same settings and row width, the
    same tokens (nothing is re-read or re-described), its own sample index. It shares ``catalog`` (the
    parent's open catalog) if given."""
    t0 = time.perf_counter()
    docs = parent.documents
    file_ids = np.unique(int_vector("file_ids", file_ids))
    if not file_ids.size or file_ids[0] < 0 or file_ids[-1] >= len(docs):
        raise InputError(f"file_ids must be non-empty and in [0, {len(docs)}), got {short_repr(file_ids.tolist())}")
    kept = np.unique(docs.doc_class[file_ids])
    new_class = np.full(len(parent.corpus.classes), -1, dtype=np.int64)
    new_class[kept] = np.arange(kept.size)
    corpus = Corpus.of(parent.corpus.class_names, [docs.paths[i] for i in file_ids.tolist()],
                       docs.doc_class[file_ids], parent.corpus.form)
    documents = docs.subset(file_ids, new_class)
    spec = parent.spec.for_subset()
    index = _index(spec, documents, len(corpus.classes))
    return Built(_resolved(spec, index, corpus.class_names), corpus, documents, index, parent.cache_root,
                 _info("subset", None, 0, t0), catalog or parent.catalog, ("subset", parent.recipe, file_ids))


def files_listing(documents: DocumentTable, classes: list[str]) -> list[list]:
    """``[[path, size, class], ...]`` in corpus order (what ``get_dict(include_files=True)`` lists)."""
    return [[p, int(s), classes[int(c)]] for p, s, c in zip(documents.paths, documents.doc_size, documents.doc_class)]


def listing_sha256(listing: list[list]) -> str:
    """The fingerprint of a file listing (``get_dict()["files_sha256"]``)."""
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def build_from_dict(d: dict, *, cache_dir: Any = None, verbose: bool = False,
                    metadata: Metadata | None = None) -> Built:
    """The dataset a ``get_dict(include_files=True)`` (or its JSON) describes: the same files, classes and
    settings, hence the same samples. FileChangedError when a file's size differs from the listing."""
    if not isinstance(d, dict) or not isinstance(d.get("files"), list) or not d["files"]:
        raise InputError("d must be a dict made by get_dict(include_files=True) (it lists the files), got "
                         f"{short_repr(d)}")
    grouped: dict[str, list[str]] = {}
    for i, item in enumerate(d["files"]):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[2], str)):
            raise InputError(f"d['files'][{i}] must be [path, size, class], got {short_repr(item)}")
        grouped.setdefault(item[2], []).append(item[0])
    built = build(grouped, Spec.from_dict(d, metadata), cache_dir=cache_dir, verbose=verbose)
    sizes = {p: s for p, s, _ in d["files"]}
    docs = built.documents
    for p, s in zip(docs.paths, docs.doc_size.tolist()):
        if sizes.get(p) != s:
            raise FileChangedError(f"{p!r}: size {s} bytes, the description says {sizes.get(p)}")
    return built
