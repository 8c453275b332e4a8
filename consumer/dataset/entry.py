"""What keys and what fills the index cache entry of a build of files: one definition for the build on this machine
(:mod:`consumer.dataset.build`) and the build whose per-file work runs on a cluster's workers
(:mod:`consumer.dataset.on_parts`), so that both make the same entry under the same key."""

from __future__ import annotations

from typing import cast

from .._version import __version__
from ..catalog.headers import HEADER_RULES_VERSION, MAX_HEADER_BYTES
from ..sources.magic import libmagic_version
from ..sources.paths import PathList
from ..spec import Spec
from ..tokens.documents import DOC_ARRAYS, DocumentTable
from ..tokens.index import AUTO_SEQLEN_CAP, INDEX_ARRAYS, SampleIndex
from .cache import cache_key, save_entry

__all__ = ["index_key", "sample_index", "save_built"]


def index_key(spec: Spec, classes: list[str], files_sha256: str) -> str:
    """The index cache key of a build of files: the settings (``spec.key_dict()``), the header rules and cap, the
    sampling cap, the package and libmagic versions, the class names and the file table's sha256
    (:func:`~consumer.dataset.cache.file_table_sha256`)."""
    return cache_key({**spec.key_dict(), "max_header_bytes": MAX_HEADER_BYTES, "header_rules": HEADER_RULES_VERSION,
                      "auto_seqlen_cap": AUTO_SEQLEN_CAP, "consumer_version": __version__, "classes": classes,
                      "libmagic": libmagic_version() if spec.metadata else None, "files_sha256": files_sha256})


def sample_index(spec: Spec, documents: DocumentTable, n_classes: int) -> SampleIndex:
    """The sample index of ``documents`` by the settings of ``spec`` (style, seqlen, long files, sampling, seed)."""
    long_files = cast(str, spec.long_files)  # never None: the spec resolves it to the style's default
    return spec.sampling.build(documents.doc_len, documents.doc_class, n_classes, style=spec.style,
                               seqlen=spec.seqlen, long_files=long_files, seed=spec.seed)


def save_built(cache_root: str, key: str, spec: Spec, documents: DocumentTable, index: SampleIndex,
               classes: list[str], form: str) -> str | None:
    """Write the entry ``key`` of a built dataset (``spec`` resolved): its document and index arrays, the paths'
    blob as it lies, and its description; the entry's folder, or None where the cache directory is read-only."""
    arrays = {**{k: getattr(documents, k) for k in DOC_ARRAYS}, **{k: getattr(index, k) for k in INDEX_ARRAYS},
              "paths": PathList.of(documents.paths).packed()}  # the blob the paths are kept in (no copy)
    tokens = index.sample_tokens()
    if tokens is not index.seg_len:  # (one segment a sample: the lengths themselves, nothing more to keep)
        arrays["sample_tokens"] = tokens  # each sample's real tokens: a reopen maps them, not sums every segment
    return save_entry(cache_root, key, arrays,
                      {"spec": spec.key_dict(), "seqlen": index.seqlen, "index_facts": index.facts(),
                       "headers": documents.headers,
                       "classes": classes, "form": form, "files": len(documents), "samples": len(index)})
