"""The on-disk cache: where it lives, index entries keyed by sha256, atomic writes, listing, clearing.

Layout under the cache directory (``cache_dir``; default ``$CONSUMER_CACHE_DIR``, else
``$XDG_CACHE_HOME/consumer``, else ``~/.cache/consumer``)::

    catalog.sqlite                 the file catalog (consumer.catalog.catalog)
    index/<key>/description.json   what the entry is: the spec it was built from, seqlen, counts, and
                                   for every array its file name, dtype, shape, size and CRC-32C
    index/<key>/<name>.npy         plain numpy arrays (memory-mappable, no pickles)

``<key>`` is the sha256 of the canonical JSON (sorted keys, no spaces) of everything that determines
the entry: the cache format version, the dataset's settings (``Spec.key_dict()``: style, n_bytes,
seqlen, long_files, sampling, metadata mode, class_to_id), the header rules and cap, the libmagic and
package versions, the class names and the sha256 of the file table (every path with its class, size
and mtime). Never Python's ``hash()``.

Writes are atomic: the entry is written into a temporary directory next to its final place, every
file fsynced, then renamed into place; if another process got there first, its entry is kept and
ours discarded. Reads verify everything: ``description.json`` carries a sha256 over its own canonical
JSON (so an edited ``seqlen`` or a flipped bit is caught), and every array its size, dtype, shape and
CRC-32C (format 4; sha256 before: the same guarantee against damage, which is not an adversary, at 12 GB/s
instead of 0.6, over the file's memory map rather than reads into the heap). The check is made when the entry is
written and recorded with each array file's stamp (inode, size, modification and change times): an open whose
files still carry their stamps maps them without reading them (O(1) in their size); a file written since, by
anything, has another change time and is checked again. Arrays of 1 MiB or more are memory-mapped read-only, so
processes opening one entry share its pages. A truncated, edited, incomplete or
otherwise damaged entry is never served and never crashes the reader (:func:`load_entry` returns None and the
caller rebuilds it). A read-only cache directory is used as it is (entries are read, new ones are not written: a
warning says so); a full disk is an error naming the directory and the bytes needed. Only our own artefacts are ever
deleted (``consumer cache clear``: :mod:`consumer.dataset.clear`); source files are never touched.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

import numpy as np

from ..errors import ConsumerWarning, FormatError
from ..formats.chunksums import crc32c_file
from ..sources.paths import PathList
from ..sources.version import FileVersion
from ..util.fileio import (
    SPACE_ERRNOS,
    fsync_dir,
    load_json_bounded,
    move_aside,
    sha256_file,
    space_error,
    temp_path,
    write_npy,
)
from ..util.locks import RangeLocks, slot_of

__all__ = ["CACHE_FORMAT", "ENTRY_LOCKS", "annotate_entry", "building", "cache_key", "entry_contents",
           "file_table_sha256",
           "save_entry", "load_entry", "list_entries", "is_entry", "INDEX_DIR"]

CACHE_FORMAT = 4  # 2: settings from Spec.key_dict(), file mtimes stored as an array; 3: int32 index fields; 4: CRC-32C
_READABLE = (3, 4)  # formats read: 4 holds the arrays of 3, checked by CRC-32C and stamps instead of sha256
_KEY_FORMAT = 3  # what keys an entry: the arrays are those of format 3, so its entries keep their keys (and are
# upgraded to format 4 in place the first time they are read)
INDEX_DIR = "index"
ENTRY_LOCKS = "index.lock"  # the lock file of "building entry <key>" claims (consumer.util.locks)
_MMAP_MIN_BYTES = 1 << 20
_KEY = re.compile(r"[0-9a-f]{64}")


_CHUNK = 1 << 16  # paths hashed per update


def file_table_sha256(paths: Sequence[str], classes: np.ndarray, sizes: np.ndarray, mtimes: np.ndarray) -> str:
    """sha256 over the file table: NUL-joined UTF-8 paths, then int64 classes, sizes and mtimes."""
    h = hashlib.sha256()
    if isinstance(paths, PathList) and sys.getfilesystemencoding() == "utf-8" and \
            sys.getfilesystemencodeerrors() == "surrogateescape":
        h.update(paths.packed().data)  # the same bytes, already joined: os.fsencode is that encoding here
        paths = []
    for i in range(0, len(paths), _CHUNK):  # the bytes of "\0".join(paths), a chunk at a time (no whole-table copy)
        if i:
            h.update(b"\0")
        h.update("\0".join(paths[i:i + _CHUNK]).encode("utf-8", "surrogateescape"))
    for arr in (classes, sizes, mtimes):
        h.update(np.ascontiguousarray(arr, dtype="<i8").tobytes())
    return h.hexdigest()




def _stamp(path: str) -> list[int]:
    """The file's :class:`~consumer.sources.version.FileVersion` (size, change stamp, device, inode) as JSON: it
    changes whenever the file is written through the file system (a process cannot set a change time back)."""
    v = FileVersion.of(os.stat(path))
    return [v.size, v.stamp, v.dev, v.ino]


def entry_contents(desc: dict) -> dict:
    """An entry's description without what says when and where it was written (its creation time, the array
    files' stamps, the checksum over both): two builds of the same dataset give equal contents."""
    out = {k: v for k, v in desc.items() if k not in ("created", "checksum")}
    if isinstance(out.get("arrays"), dict):
        out["arrays"] = {name: {k: v for k, v in meta.items() if k != "stamp"} for name, meta in out["arrays"].items()}
    return out


def cache_key(spec: dict) -> str:
    """sha256 hex of the canonical JSON of ``spec`` (which includes the file-table hash)."""
    canonical = json.dumps({"cache_format": _KEY_FORMAT, **spec}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _entry_dir(root: str, key: str) -> str:
    return os.path.join(root, INDEX_DIR, key)


def _checksum(desc: dict) -> str:
    """sha256 of the canonical JSON of a description without its own ``checksum`` field."""
    body = {k: v for k, v in desc.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _write_error(root: str, need: int, e: OSError) -> str | None:
    """Why an entry could not be written: a full disk, a quota or a file-size limit is an error
    (:class:`~consumer.errors.StorageFullError` naming the directory and the bytes needed); a read-only or
    forbidden cache directory only means "not cached" (a warning)."""
    if e.errno in SPACE_ERRNOS:  # the old entries stay; the new one's temporary folder is removed by the caller
        raise space_error(e.filename or root, need, "cache_dir (the index cache; or pass cache_dir=False)",
                          e.errno) from None
    if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        warnings.warn(f"cache_dir {root!r} is not writable ({e.strerror}): the index is not cached, the next "
                      "build recomputes it", ConsumerWarning, stacklevel=4)
        return None
    raise e


@contextmanager
def building(root: str, key: str) -> Iterator[None]:
    """Hold the claim on building entry ``key`` for the ``with`` block, waiting while another process (or
    another dataset of this one) holds it: of many processes missing the same entry at once, one builds it
    and the others, let in once it is saved, find it (:func:`load_entry`) instead of building it again. The
    claim dies with its holder (a killed builder lets the next one in). A cache directory that cannot hold
    the lock file (read-only) gives no claim: every process builds alone."""
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        pass
    locks = RangeLocks(os.path.join(root, ENTRY_LOCKS))
    try:
        with locks.holding(slot_of(key)):
            yield
    finally:
        locks.close()


def save_entry(root: str, key: str, arrays: dict[str, np.ndarray], description: dict) -> str | None:
    """Write an entry atomically (see the module docstring); returns its directory, or None when the cache
    directory is read-only (a warning says so). A full disk raises StorageFullError with the bytes needed.
    Damaged artefacts in the way (an entry or the ``index`` folder replaced by a file) are moved aside."""
    final = _entry_dir(root, key)
    parent = os.path.dirname(final)
    need = int(sum(np.asarray(a).nbytes for a in arrays.values())) + 4096
    try:
        if os.path.lexists(parent) and not os.path.isdir(parent):
            move_aside(parent)
        os.makedirs(parent, exist_ok=True)
        if os.path.lexists(final) and not os.path.isdir(final):
            move_aside(final)
        tmp = str(temp_path(final))
        os.makedirs(tmp)
    except OSError as e:
        return _write_error(root, need, e)
    try:
        files = {}
        for name, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            path = os.path.join(tmp, f"{name}.npy")
            with open(path, "wb") as f:
                write_npy(f, arr)
                f.flush()
                os.fsync(f.fileno())
            files[name] = {"file": f"{name}.npy", "dtype": arr.dtype.str, "shape": list(arr.shape),
                           "bytes": os.path.getsize(path), "crc32c": crc32c_file(path), "stamp": _stamp(path)}
        desc = {**description, "cache_format": CACHE_FORMAT, "key": key, "created": time.time(), "arrays": files}
        desc["checksum"] = _checksum(desc)
        with open(os.path.join(tmp, "description.json"), "w", encoding="utf-8") as f:
            json.dump(desc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
        if os.path.isdir(final):  # a corrupt entry we are replacing, or a concurrent writer's
            if load_entry(root, key) is not None:
                return final
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if load_entry(root, key) is None:  # lost a race to a writer whose entry is broken
                raise
        fsync_dir(parent)
        return final
    except OSError as e:
        return _write_error(root, need, e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_entry(root: str, key: str, skip: tuple[str, ...] = ()) -> tuple[dict[str, np.ndarray], dict] | None:
    """The entry's arrays (read-only memory maps) and description, or None if missing or damaged.
    Arrays named in ``skip`` (``"*"``: all) are neither read nor verified (a caller that does not need them)."""
    folder = _entry_dir(root, key)
    try:
        with open(os.path.join(folder, "description.json"), "rb") as f:
            desc = load_json_bounded(f.read(), os.path.join(folder, "description.json"))
        if not isinstance(desc, dict) or desc.get("cache_format") not in _READABLE or desc.get("key") != key \
                or desc.get("checksum") != _checksum(desc):
            return None
        arrays = {}
        old = desc["cache_format"] == 3
        for name, meta in desc["arrays"].items():
            if name in skip or "*" in skip:
                continue
            path = os.path.join(folder, meta["file"])
            if os.path.getsize(path) != meta["bytes"]:
                return None
            if "crc32c" not in meta:  # format 3 (an entry a pickled dataset of 0.8 or before names)
                if sha256_file(path) != meta["sha256"]:
                    return None
            elif meta.get("stamp") != _stamp(path) and crc32c_file(path) != meta["crc32c"]:
                return None  # written since it was checked, and damaged
            # large arrays are memory-mapped (shared by forked workers); small ones are read, which
            # costs nothing extra after the checksum and keeps no file descriptor open per array
            arr = np.load(path, mmap_mode="r" if meta["bytes"] >= _MMAP_MIN_BYTES else None, allow_pickle=False)
            if arr.dtype.str != meta["dtype"] or list(arr.shape) != meta["shape"]:
                return None
            arrays[name] = arr
        if old and not skip:
            _upgrade(folder, desc)
        return arrays, desc
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, FormatError):
        return None  # damaged or incomplete in any way: rebuilt by the caller, never served


def _upgrade(folder: str, desc: dict) -> None:
    """A format-3 entry's description rewritten as format 4 (its arrays just checked by sha256: their CRC-32C
    and stamps recorded), so later opens need not read them; left as it is where the folder is read-only."""
    new = {k: v for k, v in desc.items() if k != "checksum"}
    new["cache_format"] = CACHE_FORMAT
    new["arrays"] = {name: {**{k: v for k, v in meta.items() if k != "sha256"},
                            "crc32c": crc32c_file(os.path.join(folder, meta["file"])),
                            "stamp": _stamp(os.path.join(folder, meta["file"]))}
                     for name, meta in desc["arrays"].items()}
    _rewrite(folder, new)


def annotate_entry(root: str, key: str, facts: dict) -> None:
    """Add ``facts`` (JSON values found after the entry was written, e.g. a fingerprint of its dataset) to the
    description of entry ``key``, if it is there and intact; nothing happens where it is not, or is read-only."""
    entry = load_entry(root, key, skip=("*",))
    if entry is None:
        return
    desc = {k: v for k, v in entry[1].items() if k != "checksum"}
    if all(desc.get(k) == v for k, v in facts.items()):
        return
    _rewrite(_entry_dir(root, key), {**desc, **facts})


def _rewrite(folder: str, desc: dict) -> None:
    """Replace the entry's description by ``desc`` (its checksum made here), atomically; read-only: left as is."""
    new = {**desc, "checksum": _checksum({k: v for k, v in desc.items() if k != "checksum"})}
    target = os.path.join(folder, "description.json")
    tmp = str(temp_path(target))
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(new, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError:
        with suppress(OSError):
            os.unlink(tmp)


def list_entries(root: str) -> list[dict]:
    """One summary per index entry: key, size on disk, creation time, style/n_bytes/files/samples."""
    folder = os.path.join(root, INDEX_DIR)
    out: list[dict] = []
    if not os.path.isdir(folder):
        return out
    for key in sorted(os.listdir(folder)):
        path = os.path.join(folder, key)
        if not os.path.isdir(path) or not is_entry(path):
            continue
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
        try:
            with open(os.path.join(path, "description.json"), encoding="utf-8") as f:
                desc = json.load(f)
        except (OSError, ValueError):
            desc = {}
        spec = desc.get("spec", {})
        out.append({"key": key, "bytes": size, "created": desc.get("created"), "style": spec.get("style"),
                    "n_bytes": spec.get("n_bytes"), "files": desc.get("files"), "samples": desc.get("samples")})
    return out


def is_entry(folder: str) -> bool:
    """Whether ``folder`` is one of our index entries (a sha256 name with our description.json)."""
    if not _KEY.fullmatch(os.path.basename(folder)):
        return False
    try:
        with open(os.path.join(folder, "description.json"), encoding="utf-8") as f:
            return "cache_format" in json.load(f)
    except (OSError, ValueError):
        return False
