"""``get_dict`` / ``to_json``: everything needed to describe and reproduce a dataset, as JSON.

The settings come from the dataset's :class:`~consumer.spec.Spec` (``Spec.to_dict()``), so the export,
the cache key and the packed sidecar never disagree; this module adds the counts, the vocabulary,
the versions and the file listing (or its fingerprint).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .._version import __version__
from ..catalog.headers import MAX_HEADER_BYTES
from ..fetch.columns import MaskConfig
from ..sources.magic import libmagic_version
from .build import Built, files_listing, listing_sha256
from .cache import annotate_entry
from .containers import container_listing
from .listing_digest import files_sha256

__all__ = ["dataset_dict", "dump_json", "load_json"]


def dataset_dict(built: Built, *, mode: str | None, mask: MaskConfig, batches: dict | None,
                 include_files: bool = False) -> dict:
    """The export of a dataset (see ``Consumer.get_dict``)."""
    docs, index, spec = built.documents, built.index, built.spec
    classes = built.corpus.class_names
    n = len(classes)
    files = np.bincount(docs.doc_class, minlength=n)
    bytes_ = np.bincount(docs.doc_class, weights=docs.doc_size, minlength=n).astype(np.int64)
    tokens = np.bincount(docs.doc_class, weights=docs.doc_len, minlength=n).astype(np.int64)
    samples = index.samples_per_class()
    listing = files_listing(docs, classes) if include_files else None
    digest = built.files_digest  # found once per dataset (a store's: once per version and settings)
    if digest is None:
        digest = files_sha256(docs, classes)  # numpy, no object per document; None: a path JSON escapes
        if digest is None:
            listing = files_listing(docs, classes) if listing is None else listing
            digest = listing_sha256(listing)
        built.files_digest = digest
        entry = built.info.get("index_entry")
        if isinstance(entry, list) and len(entry) == 2:  # a store's index entry: the next open finds it there
            annotate_entry(entry[0], entry[1], {"files_sha256": digest})
    settings = spec.to_dict()
    out = {
        "consumer_version": __version__,
        "data_mode": built.corpus.form,
        **{k: settings[k] for k in ("style", "n_bytes", "seqlen", "seqlen_requested", "long_files", "sampling",
                                    "metadata", "dedupe")},
        **{k: settings[k] for k in ("documents", "text_field", "class_field", "on_bad_record") if k in settings},
        "max_header_bytes": MAX_HEADER_BYTES,
        "seed": spec.seed,
        "mode": mode,
        "mask": mask.settings(),
        "n_classes": n,
        "classes": classes,
        "class_to_id": settings["class_to_id"],
        "per_class": {c: {"files": int(files[i]), "bytes": int(bytes_[i]), "tokens": int(tokens[i]),
                          "samples": int(samples[i])} for i, c in enumerate(classes)},
        "total_files": len(docs),
        "total_samples": len(index),
        "vocab": spec.vocab.to_dict(),
        "vocab_size": spec.vocab.size,
        "libmagic_version": libmagic_version(),
        "files_sha256": digest,
    }
    if batches is not None:
        out["batches"] = {k: v for k, v in batches.items() if k not in ("version", "epoch", "position")}
    if include_files:
        out["files"] = listing
        containers = container_listing(docs, classes)
        if containers is not None:  # documents inside containers: the containers are what a rebuild lists
            out["containers"] = containers
    return out


def dump_json(d: dict, fp: Any = None) -> str | None:
    """``d`` as indented JSON text, or written to the file ``fp`` (then ``None`` is returned)."""
    text = json.dumps(d, indent=2)
    if fp is None:
        return text
    with open(fp, "w", encoding="utf-8") as f:
        f.write(text)
    return None


def load_json(text_or_path: Any) -> dict:
    """A JSON object from a string holding it or from a file path."""
    if isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
        return json.loads(text_or_path)
    with open(os.fspath(text_or_path), encoding="utf-8") as f:
        return json.load(f)
