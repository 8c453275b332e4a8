"""The persistent document index of each container, with its decode cache, under ``<cache_dir>/records/<key>/``.

``<key>`` is the sha256 of the container's path, size, change stamp, device and inode (an object's ETag), the record
options and :data:`STASH_VERSION`: a container that changed gets a new key (re-indexing touches only containers that
changed), and an entry is never read for another version of its container. An entry is ``index.npz`` (the arrays of
:class:`~consumer.sources.records.scanned.Scanned`, no pickles), ``decoded.bin`` (documents with no byte range in the
container, one after another) and ``meta.json`` (counts, sizes); it is written in a temporary directory and renamed
into place when complete, so a failed scan (a bad record) leaves nothing behind. A damaged or incomplete entry is
never served: it reads as missing and the container is scanned again."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable

import numpy as np

from .options import RecordOptions
from .scanned import DecodeSink, Scanned

__all__ = ["STASH_VERSION", "stash_key", "load_stash", "scan_into_stash"]

STASH_VERSION = 2  # 2: compressed JSONL entries hold their lines (json_offset) in the decode cache
_ARRAYS = ("offset", "length", "record", "inplace", "json_offset", "json_length")


def stash_key(path: str, size: int, stamp: int, ident: tuple[int, int] | None, options: RecordOptions,
              etag: str | None = None) -> str:
    """The key of a container's entry (see the module docstring); ``etag``: an object's ETag, when it has one."""
    extra = {} if etag is None else {"etag": etag}
    blob = json.dumps({"v": STASH_VERSION, "path": path, "size": int(size), "stamp": int(stamp),
                       "ident": None if ident is None else [int(x) for x in ident], **extra, **options.to_dict()},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogateescape")).hexdigest()


def _dir(root: str, key: str) -> str:
    return os.path.join(root, "records", key[:2], key)


def load_stash(root: str, key: str) -> tuple[Scanned, str] | None:
    """The entry ``key`` (its scan and its decode file's path), or None when it is missing or damaged."""
    where = _dir(root, key)
    try:
        with open(os.path.join(where, "meta.json"), "rb") as f:
            meta = json.loads(f.read())
        decoded = os.path.join(where, "decoded.bin")
        if os.path.getsize(decoded) != meta["decoded_bytes"] or meta.get("key") != key:
            return None
        with np.load(os.path.join(where, "index.npz"), allow_pickle=False) as z:
            arrays = {k: z[k] for k in _ARRAYS if k in z}
            names = z["names"].tolist() if "names" in z else None
            classes = z["classes"].tolist() if "classes" in z else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(arrays[k].size == meta["documents"] for k in ("offset", "length", "record", "inplace")):
        return None
    scanned = Scanned(offset=arrays["offset"], length=arrays["length"], record=arrays["record"],
                      inplace=arrays["inplace"], names=names, classes=classes, json_offset=arrays.get("json_offset"),
                      json_length=arrays.get("json_length"), counts=meta["counts"])
    return scanned, decoded


def scan_into_stash(root: str, key: str, scan: Callable[[DecodeSink], Scanned]) -> tuple[Scanned, str]:
    """Run ``scan`` writing its decoded documents into a new entry ``key``, and publish the entry when the scan
    succeeds (nothing is left when it raises). Another process that published the same key first wins."""
    final = _dir(root, key)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = f"{final}.{secrets.token_hex(6)}.tmp"
    os.makedirs(tmp)
    try:
        with open(os.path.join(tmp, "decoded.bin"), "wb") as f:
            sink = DecodeSink(f)
            scanned = scan(sink)
            f.flush()
            os.fsync(f.fileno())
        arrays = {k: getattr(scanned, k) for k in _ARRAYS if getattr(scanned, k) is not None}
        if scanned.names is not None:
            arrays["names"] = np.array(scanned.names, dtype=str)
        if scanned.classes is not None:
            arrays["classes"] = np.array(scanned.classes, dtype=str)
        with open(os.path.join(tmp, "index.npz"), "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        meta = {"key": key, "documents": len(scanned), "decoded_bytes": sink.size, "counts": scanned.counts}
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.rename(tmp, final)
        except OSError:  # published by another process meanwhile: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    got = load_stash(root, key)
    if got is None:
        return scanned, os.path.join(final, "decoded.bin")
    return got
