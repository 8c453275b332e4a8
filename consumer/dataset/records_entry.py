"""A records dataset's documents and sample index, built once per version of its containers and then mapped: its
entry in the index cache.

Each container keeps its own persistent index (:mod:`consumer.sources.records.stash`), so a changed container is
the only one scanned again. Assembling a dataset from them is still work in the number of documents: every
container's arrays concatenated (and reordered with ``class_field``), the headers, each document's length in tokens
and the sample index. At 10^7 documents that is seconds and hundreds of MiB in every process, at every open. So the
assembled arrays are one entry of the index cache (:mod:`consumer.dataset.cache`: written atomically, a CRC-32C per
array, arrays of 1 MiB or more mapped read-only and shared by every process that opens the dataset), and a reopen
of the same containers under the same settings maps them: its work is the listing and the ``stat`` of each
container, plus reading one small description.

The entry's key (:func:`entry_key`) is the sha256 of each container's persistent-index key (its path, size, change
stamp, device and inode, or its ETag, and the record options: :func:`~consumer.sources.records.stash.stash_key`),
each container's class, the settings that shape the index (``Spec.key_dict()``) and the package version. A
container written since gets a new stash key, so the dataset gets a new entry; nothing of another version is ever
served. A decode cache (documents with no byte range in their container) stays in its container's stash entry:
the dataset entry records its size, and an entry whose decode caches are gone or of another size reads as missing
(the dataset is assembled again, scanning what must be).

Document paths are not stored when they can be made from the arrays (``container#record``: made only when asked
for, :class:`~consumer.sources.records.names.RecordPaths`); tar member names and the paths left after
``dedupe="content"`` are stored as a blob and offsets. A dataset with a callable ``metadata`` is not cached (its
headers come from code the key cannot name).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .._version import __version__
from ..formats.raw_index import raw_index_path
from ..sources.base import ByteSource
from ..sources.corpus import ClassFiles, Corpus
from ..sources.objects import ObjectFiles
from ..sources.paths import PathList
from ..sources.records import RecordFiles, RecordOptions
from ..sources.records.names import RecordPaths
from ..sources.records.stash import stash_decoded, stash_key
from ..spec import Spec
from ..tokens.documents import DocumentTable
from ..tokens.index import INDEX_ARRAYS, SampleIndex
from ..tokens.vocab import Vocab
from .cache import cache_key, load_entry, save_entry

__all__ = ["Assembled", "container_key", "entry_key", "load_records", "make_corpus", "save_records"]

_FORMAT = 1  # of these entries' arrays and descriptions
_MAX_REPORT_BYTES = 1 << 20  # a dedupe report larger than this (as JSON) leaves the dataset uncached
_OPTIONAL = ("json_offset", "json_length")


def container_version(source: ByteSource, i: int) -> tuple[tuple[int, int] | None, str | None]:
    """The inode (local files) or ETag (objects) a container's persistent entry is keyed on, beside its stamp (and
    the raw index beside a local container, by size and change time)."""
    if isinstance(source, ObjectFiles):
        return None, source.etags[i]
    ident: Any = getattr(source, "ident", None)
    try:
        st = os.stat(raw_index_path(source.paths[i]))
        raw = f"raw-index {st.st_size} {st.st_mtime_ns}"
    except OSError:
        raw = None
    return (None if ident is None else (int(ident[i, 0]), int(ident[i, 1]))), raw


def container_key(source: ByteSource, i: int, options: RecordOptions) -> str:
    """The key of container ``i``'s persistent index (:func:`~consumer.sources.records.stash.stash_key`)."""
    ident, etag = container_version(source, i)
    return stash_key(source.paths[i], int(source.sizes[i]), int(source.stamps[i]), ident, options, etag)


def entry_key(keys: list[str], classes: list[str], spec: Spec) -> str | None:
    """The key of the dataset entry of containers ``keys`` (their stash keys) of classes ``classes`` under
    ``spec``, or None when such a dataset is not cached (a callable ``metadata``)."""
    if callable(spec.metadata):
        return None
    return cache_key({"records_dataset": _FORMAT, "containers": keys, "classes": classes, "spec": spec.key_dict(),
                      "consumer_version": __version__})


def make_corpus(names: list[str], paths: PathList, doc_class: np.ndarray, form: str) -> Corpus:
    """The corpus of the documents (``doc_class`` non-decreasing: one slice of ``paths`` per class)."""
    bounds = np.searchsorted(doc_class, np.arange(len(names) + 1, dtype=doc_class.dtype))  # same dtype: no copy
    return Corpus(classes=tuple(ClassFiles(name=n, paths=paths[int(bounds[k]):int(bounds[k + 1])])
                                for k, n in enumerate(names) if bounds[k + 1] > bounds[k]), form=form)


class Assembled:
    """What a records build made: class ``names``, the corpus ``form``, the ``records`` (a
    :class:`~consumer.sources.records.RecordFiles`), its ``documents`` and sample ``index``, and the build's
    ``info`` (``records`` counts, ``dedupe`` report)."""

    def __init__(self, names: list[str], form: str, records: RecordFiles, documents: DocumentTable,
                 index: SampleIndex, info: dict) -> None:
        self.names, self.form, self.records, self.documents, self.index, self.info = \
            names, form, records, documents, index, info

    def corpus(self) -> Corpus:
        """The corpus of the documents, by class."""
        return make_corpus(self.names, PathList.of(self.documents.paths), self.documents.doc_class, self.form)


def _path_arrays(paths: Any) -> tuple[str, dict[str, np.ndarray]]:
    """How the documents' paths are kept in the entry: ``"ordered"`` (made from the documents' own containers and
    records), ``"reordered"`` (from the containers' order, then taken in a stored order) or ``"blob"`` (stored)."""
    numbered = paths.numbered() if isinstance(paths, RecordPaths) else None
    if numbered is not None:
        container, record, order = numbered
        if order is None:
            return "ordered", {}
        return "reordered", {"path_container": container, "path_record": record, "path_order": order}
    made = PathList.of(paths)
    return "blob", {"path_blob": made.packed(), "path_at": made.offsets()}


def save_records(root: str, key: str, made: Assembled, container_keys: list[str], spec: Spec) -> bool:
    """Write ``made`` (built under ``spec``) as the dataset entry ``key`` under ``root``; whether it is there
    now (not with a read-only cache, decode caches kept in memory, or a dedupe report too large to keep)."""
    records, docs, index = made.records, made.documents, made.index
    report = made.info.get("dedupe")
    if report is not None and len(json.dumps(report)) > _MAX_REPORT_BYTES:
        return False
    decoded: list[str] = [d for d in records.decoded if isinstance(d, str)]
    if len(decoded) != len(records.decoded):  # decode caches kept in memory: nothing on disk to name
        return False
    how, path_arrays = _path_arrays(docs.paths)
    arrays = {"doc_class": docs.doc_class, "doc_container": records.doc_container, "doc_offset": records.doc_offset,
              "doc_length": records.sizes, "doc_inplace": records.doc_inplace, "record": records.record,
              "doc_mtime": records.stamps, "from_lines": records.from_lines, "header_ptr": docs.header_ptr,
              "header_tok": docs.header_tok, "sample_tokens": index.sample_tokens(), **path_arrays,
              **{k: getattr(index, k) for k in INDEX_ARRAYS}}
    arrays.update({k: getattr(records, k) for k in _OPTIONAL if getattr(records, k) is not None})
    if docs.with_header:
        arrays["doc_header"] = docs.doc_header
    return save_entry(root, key, arrays, {
        "kind": "records dataset", "format": _FORMAT, "spec": spec.key_dict(), "classes": made.names,
        "form": made.form, "paths": how, "index_facts": index.facts(), "headers": docs.headers,
        "with_header": docs.with_header, "seqlen": index.seqlen, "files": len(docs), "samples": len(index),
        "containers": container_keys, "decoded_bytes": [os.path.getsize(d) for d in decoded],
        "info": made.info}) is not None


def load_records(root: str, key: str, source: ByteSource, options: RecordOptions, n_bytes: int) -> Assembled | None:
    """The dataset entry ``key`` over the containers ``source`` (as listed now), its arrays mapped; None when it
    is missing, damaged, or a decode cache it needs is gone (the caller assembles the dataset again)."""
    entry = load_entry(root, key)
    if entry is None:
        return None
    arrays: dict[str, Any] = entry[0]
    desc = entry[1]
    try:
        caches = [stash_decoded(root, k, int(n))
                  for k, n in zip(desc["containers"], desc["decoded_bytes"], strict=True)]
        if len(caches) != len(source) or any(c is None for c in caches) or desc.get("format") != _FORMAT:
            return None
        records = RecordFiles(source, _paths(desc["paths"], arrays, source), arrays["doc_container"],
                              arrays["doc_offset"], arrays["doc_length"], arrays["doc_inplace"], caches,
                              arrays.get("json_offset"), arrays.get("json_length"), arrays["record"],
                              arrays["from_lines"], options, stamps=arrays["doc_mtime"])
        n = len(records)
        with_header = bool(desc["with_header"])
        docs = DocumentTable(vocab=Vocab(n_bytes), paths=records.paths, doc_class=arrays["doc_class"],
                             doc_size=records.sizes, headers=list(desc["headers"]),
                             doc_header=arrays["doc_header"] if with_header else np.zeros(n, dtype=np.int32),
                             header_ptr=arrays["header_ptr"], header_tok=arrays["header_tok"],
                             with_header=with_header, doc_mtime=records.stamps, source=records)
        index = SampleIndex(seqlen=int(desc["seqlen"]), **{k: arrays[k] for k in INDEX_ARRAYS})
        index.remember_sample_tokens(arrays["sample_tokens"])
        index.remember_facts(desc["index_facts"])
        if len(docs.paths) != n or arrays["doc_class"].shape != (n,) or docs.doc_header.shape != (n,):
            return None
        info = dict(desc["info"])
        return Assembled(list(desc["classes"]), str(desc["form"]), records, docs, index, info)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def _paths(how: str, arrays: dict[str, np.ndarray], source: ByteSource) -> PathList:
    """The documents' paths as :func:`_path_arrays` kept them."""
    names = list(source.paths)
    if how == "ordered":
        return RecordPaths((names, arrays["doc_container"], arrays["record"], None))
    if how == "reordered":
        return RecordPaths((names, arrays["path_container"], arrays["path_record"], None, arrays["path_order"]))
    if how == "blob":
        return PathList(arrays["path_blob"], np.asarray(arrays["path_at"], dtype=np.int64))
    raise ValueError(f"paths: unknown kind {how!r}")
