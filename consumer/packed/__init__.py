"""Packed token stores: every document of a corpus written once, then served from memory maps.

Split by job: :mod:`~consumer.packed.layout` (the on-disk format: files, sidecar, file table, each
read and written there), :mod:`~consumer.packed.write` (:func:`pack`) and :mod:`~consumer.packed.merge`
(:func:`merge_packed`), both through one commit path (:mod:`~consumer.packed.commit`), and
:mod:`~consumer.packed.open` (:func:`open_packed`, :func:`inspect_packed`, :func:`read_sidecar`) and
:mod:`~consumer.packed.verify` (:func:`verify_packed`: every byte); :mod:`~consumer.packed.sums` ties the
per-chunk checksums (``PREFIX.consumer.sums``) to a store.
"""

from __future__ import annotations

from .layout import FORMATS, StoreFormat, store_dtype
from .merge import merge_packed
from .open import inspect_packed, open_packed, read_sidecar
from .verify import verify_packed
from .write import pack

__all__ = ["FORMATS", "StoreFormat", "store_dtype", "pack", "merge_packed", "open_packed", "inspect_packed",
           "read_sidecar", "verify_packed"]
