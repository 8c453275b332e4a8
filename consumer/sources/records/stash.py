"""The persistent document index of each container, with its decode cache, under ``<cache_dir>/records/<key>/``.

``<key>`` is the sha256 of the container's path, size, change stamp, device and inode (an object's ETag), the record
options and :data:`STASH_VERSION`: a container that changed gets a new key (re-indexing touches only containers that
changed), and an entry is never read for another version of its container.

An entry is ``index.bin`` (the arrays of :class:`~consumer.sources.records.scanned.Scanned` back to back, raw: no
pickle, no zip), ``decoded.bin`` (documents with no byte range in the container, one after another: empty for a
plain JSONL container, whose texts are decoded from their lines when read) and ``meta.json`` (the layout of
``index.bin``, the size of both files, counts, ``from_lines``). Durability, once per build
(:class:`StashBatch`): every entry of a build is written in a temporary directory beside its place; when the build's
scans are done, one durability barrier puts all their files on stable storage (:func:`durable`: an fsync of each
file, several at once, or one ``syncfs`` of the cache's file system when they are many), and only then is each
directory renamed into place. So a published entry is complete after a crash at any point; a crash before the
renames leaves only temporary directories, which are never read (:func:`sweep` removes them a day later). A failed
scan (a bad record) leaves nothing behind. An entry whose files do not match its ``meta.json`` (sizes, layout) is
never served: it reads as missing and the container is scanned again."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

import numpy as np

from .options import RecordOptions
from .scanned import DecodeSink, Scanned

__all__ = ["STASH_VERSION", "FEW_FILES", "StashBatch", "durable", "load_stash", "stash_decoded", "stash_key", "sweep"]

STASH_VERSION = 5  # 2: compressed JSONL entries hold their lines in the decode cache; 3: index.bin (raw arrays,
# int32 where they fit; classes as codes) instead of index.npz; 4: plain JSONL texts decoded from their lines when
# read (``from_lines`` in meta.json), not written to the decode cache; 5: JSON records nested deeper than
# MAX_JSON_DEPTH and tar members with a negative size are refused (an entry of 4 may hold one)
_ARRAYS = ("offset", "length", "record", "inplace", "json_offset", "json_length", "class_codes")
_TEXTS = ("names", "class_names")  # lists of str, stored as (ends, utf-8 blob)
FEW_FILES = 256
"""Up to this many files (128 containers), the durability barrier fsyncs each, on up to :data:`_SYNC_THREADS` threads
at once; beyond, one ``syncfs`` (where there is one). ``syncfs`` waits for every dirty page of the file system, other
processes' writes included: 4-9 ms for 64 files of a build on a quiet machine, 415-440 ms when other processes were
writing, where the 64 fsyncs took 12-25 ms either way (32 JSONL shards, docs/records.md)."""
_SYNC_THREADS = 8
_STALE_SECONDS = 24 * 3600  # a temporary directory this old is left from a crash: removed by sweep()


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


def _texts(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as ``(ends, blob)``: their UTF-8 bytes (surrogate escapes kept) one after another."""
    raw = [v.encode("utf-8", "surrogateescape") for v in values]
    ends = np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)))
    return ends, np.frombuffer(b"".join(raw), dtype=np.uint8)


def _strings(ends: np.ndarray, blob: np.ndarray) -> list[str]:
    data = blob.tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [data[a:b].decode("utf-8", "surrogateescape") for a, b in zip(starts, ends.tolist())]


def _write_index(path: str, scanned: Scanned) -> dict[str, list[Any]]:
    """Write the arrays of ``scanned`` to ``path`` back to back; their layout ``{name: [dtype, count, offset]}``."""
    arrays = {k: getattr(scanned, k) for k in _ARRAYS if getattr(scanned, k) is not None}
    for k in _TEXTS:
        if getattr(scanned, k) is not None:
            arrays[f"{k}_ends"], arrays[f"{k}_blob"] = _texts(getattr(scanned, k))
    layout: dict[str, list[Any]] = {}
    at = 0
    with open(path, "wb") as f:
        for k, a in arrays.items():
            a = np.ascontiguousarray(a)
            layout[k] = [a.dtype.str, int(a.size), at]
            f.write(a.view(np.uint8))  # type: ignore[arg-type]  # an array is a buffer: no copy
            at += a.nbytes
    return layout


def _meta(root: str, key: str) -> tuple[dict[str, Any], str] | None:
    """Entry ``key``'s ``meta.json`` and its decode cache's path, when the entry is there for that key and the
    decode cache holds the bytes the meta says, else None."""
    where = _dir(root, key)
    try:
        with open(os.path.join(where, "meta.json"), "rb") as f:
            meta = json.loads(f.read())
        decoded = os.path.join(where, "decoded.bin")
        ok = isinstance(meta, dict) and meta.get("key") == key and \
            os.path.getsize(decoded) == meta.get("decoded_bytes")
    except (OSError, ValueError):
        return None
    return (meta, decoded) if ok else None


def load_stash(root: str, key: str) -> tuple[Scanned, str] | None:
    """The entry ``key`` (its scan and its decode file's path), or None when it is missing or damaged."""
    found = _meta(root, key)
    if found is None:
        return None
    meta, decoded = found
    try:
        arrays = {}
        with open(os.path.join(_dir(root, key), "index.bin"), "rb") as f:
            if os.fstat(f.fileno()).st_size != meta["index_bytes"]:
                return None
            for k, (dtype, count, at) in meta["layout"].items():  # each array read into its own buffer
                if np.dtype(dtype).kind not in "biu":  # integers and booleans only
                    return None
                a = np.empty(int(count), dtype=np.dtype(dtype))
                f.seek(int(at))
                if f.readinto(a.view(np.uint8)) != a.nbytes:  # type: ignore[arg-type]
                    return None
                arrays[k] = a
    except (OSError, ValueError, KeyError, TypeError):
        return None
    n = meta["documents"]
    if not all(k in arrays and arrays[k].size == n for k in ("offset", "length", "record", "inplace")) or \
            not all(arrays[k].size == n for k in ("json_offset", "json_length", "class_codes") if k in arrays):
        return None
    texts = {k: _strings(arrays[f"{k}_ends"], arrays[f"{k}_blob"]) if f"{k}_ends" in arrays else None
             for k in _TEXTS}
    codes = arrays.get("class_codes")
    if codes is not None and codes.size and (texts["class_names"] is None or
                                             not 0 <= int(codes.min()) <= int(codes.max()) < len(texts["class_names"])):
        return None
    scanned = Scanned(offset=arrays["offset"], length=arrays["length"], record=arrays["record"],
                      inplace=arrays["inplace"], names=texts["names"], json_offset=arrays.get("json_offset"),
                      json_length=arrays.get("json_length"), counts=meta["counts"],
                      class_names=texts["class_names"], class_codes=arrays.get("class_codes"),
                      from_lines=bool(meta.get("from_lines", False)))
    return scanned, decoded


def stash_decoded(root: str, key: str, size: int) -> str | None:
    """The path of entry ``key``'s decode cache when the entry is there for that key and its decode cache holds
    ``size`` bytes, else None (a dataset assembled from the entry must be assembled again)."""
    found = _meta(root, key)
    return found[1] if found is not None and found[0].get("decoded_bytes") == size else None


def _syncfs(path: str) -> bool:
    """``syncfs(2)`` of the file system holding ``path`` (Linux); False where there is none or it fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        return bool(call(fd) == 0)
    finally:
        os.close(fd)


def durable(files: list[str], root: str, few: int = FEW_FILES) -> None:
    """The durability barrier: every one of ``files`` (under ``root``) on stable storage when it returns. Up to
    ``few`` files: an fsync of each, several at once (the file system joins concurrent fsyncs into one journal
    commit); more: one ``syncfs`` of ``root``'s file system (the fsyncs where that is not available). The first
    file (in order) that cannot be synced raises its error."""
    if len(files) > few and _syncfs(root):
        return
    if len(files) <= 1:
        for path in files:
            _fsync(path)
        return
    with ThreadPoolExecutor(max_workers=min(_SYNC_THREADS, len(files)), thread_name_prefix="consumer-fsync") as pool:
        list(pool.map(_fsync, files))


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sweep(folder: str, older_than: float = _STALE_SECONDS) -> int:
    """Remove the temporary entry directories in ``folder`` (a ``records/<xx>`` folder of the cache) older than
    ``older_than`` seconds: left by a build that crashed before publishing them. How many were removed."""
    gone = 0
    limit = time.time() - older_than
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        try:
            stale = name.endswith(".tmp") and os.stat(path).st_mtime < limit
        except OSError:
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            gone += 1
    return gone


def _rename(tmp: str, final: str, root: str) -> None:
    """Publish ``tmp`` as ``final``. An entry already there is kept when it loads (another process published the
    same key meanwhile), else (damaged) moved aside and replaced."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        pass
    if load_stash(root, os.path.basename(final)) is None:
        aside = f"{final}.{secrets.token_hex(6)}.tmp"
        try:
            os.rename(final, aside)
            shutil.rmtree(aside, ignore_errors=True)
            os.rename(tmp, final)
            return
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)


class StashBatch:
    """The entries one build writes (:meth:`scan`), published together by :meth:`publish`: one durability barrier
    for all their files, then a rename of each into place (see the module docstring). As a context manager it
    publishes the entries completed so far on leaving, also when a later scan raised."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._pending: list[tuple[str, str, list[str]]] = []  # (temporary dir, final dir, files to make durable)

    def __enter__(self) -> StashBatch:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.publish()

    def scan(self, key: str, scan: Callable[[DecodeSink], Scanned]) -> tuple[Scanned, str]:
        """Run ``scan`` writing its decoded documents into a new entry ``key`` (a temporary directory until
        :meth:`publish`; nothing is left when it raises); the scan and the decode file's path once published."""
        final = _dir(self.root, key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = f"{final}.{secrets.token_hex(6)}.tmp"
        os.makedirs(tmp)
        try:
            with open(os.path.join(tmp, "decoded.bin"), "wb") as f:
                sink = DecodeSink(f)
                scanned = scan(sink)
            layout = _write_index(os.path.join(tmp, "index.bin"), scanned)
            index_bytes = os.path.getsize(os.path.join(tmp, "index.bin"))
            meta = {"key": key, "documents": len(scanned), "decoded_bytes": sink.size, "index_bytes": index_bytes,
                    "layout": layout, "counts": scanned.counts, "from_lines": scanned.from_lines}
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump(meta, f)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        files = [os.path.join(tmp, n) for n, size in (("decoded.bin", sink.size), ("index.bin", index_bytes),
                                                       ("meta.json", 1)) if size]
        self._pending.append((tmp, final, files))
        return scanned, os.path.join(final, "decoded.bin")

    def publish(self) -> None:
        """Make the pending entries durable (one barrier), then rename each into place; an entry another process
        published first is kept (ours is dropped), a damaged one replaced. Nothing pending is left behind when this
        raises."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            durable([f for _, _, files in pending for f in files], self.root)
        except BaseException:
            for tmp, _, _ in pending:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        for tmp, final, _ in pending:
            _rename(tmp, final, self.root)
        for folder in sorted({os.path.dirname(final) for _, final, _ in pending}):
            sweep(folder)  # what crashed builds left in the folders written
