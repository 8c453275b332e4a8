"""The file table of a packed store (``PREFIX.consumer.npz``): symmetric write and read.

Layout (``np.savez_compressed``, no pickled objects), in store order:

    paths       uint8[...]  every source path, os.fsencode'd, joined by NUL
    doc_class   int32[D]    index into the sidecar's "classes"
    doc_size    int64[D]    source file size in bytes
    doc_header  int32[D]    index into the sidecar's "headers"

Reading checks every field against the sidecar (FormatError naming the file, expected vs actual), and
refuses a member that declares more bytes than ``D`` documents can need before anything is inflated.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import FormatError
from ..util.fileio import pack_paths, unpack_paths

__all__ = ["TABLE_KEYS", "write_table", "read_table"]

_TABLE_KEYS = ("paths", "doc_class", "doc_size", "doc_header")
TABLE_KEYS = _TABLE_KEYS


def write_table(path: Path, paths: Sequence[str], doc_class, doc_size, doc_header) -> None:
    """The file table as a compressed ``.npz`` at ``path`` (created exclusively, fsynced)."""
    blob = pack_paths(paths)
    with open(path, "xb") as f:
        np.savez_compressed(f, paths=blob, doc_class=np.asarray(doc_class, dtype=np.int32),
                            doc_size=np.asarray(doc_size, dtype=np.int64),
                            doc_header=np.asarray(doc_header, dtype=np.int32))
        f.flush()
        os.fsync(f.fileno())



_PATH_MAX = 4096  # bytes of one path at most (PATH_MAX), so the paths blob is bounded by the document count


def _check_table_sizes(path: Path, n: int) -> None:
    """Refuse a table whose members would inflate past what ``n`` documents can need, before inflating
    anything: zipfile never produces more than a member's declared size, so declared sizes bound memory."""
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
    except Exception as e:  # noqa: BLE001  (zipfile raises many types on damaged bytes: NotImplementedError too)
        raise FormatError(f"{path}: file table: expected an .npz of plain arrays, got an unreadable file "
                          f"({type(e).__name__}: {e})") from None
    caps = {"paths.npy": n * (_PATH_MAX + 1) + 4096}
    for m in members:
        cap = caps.get(m.filename, n * 8 + 4096)
        if m.file_size > cap:
            raise FormatError(f"{path}: file table member {m.filename!r}: expected at most {cap} bytes for {n} "
                              f"documents, got {m.file_size} declared (refused before inflating)")


def read_table(path: Path, side: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The file table (store order): paths, class index, size, header index, all checked."""
    n = side["documents"]
    _check_table_sizes(path, n)
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in _TABLE_KEYS if k not in z.files]
            if missing:
                raise FormatError(f"{path}: file table: expected arrays {list(_TABLE_KEYS)}, missing {missing}")
            arrays = {k: z[k] for k in _TABLE_KEYS}
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001  (zlib/zipfile/numpy raise many types on damaged bytes)
        raise FormatError(f"{path}: file table: expected an .npz of plain arrays, got an unreadable file "
                          f"({type(e).__name__}: {e})") from None
    for key in _TABLE_KEYS[1:]:
        arr = arrays[key]
        if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
            raise FormatError(f"{path}: file table {key!r}: expected {n} integers (sidecar 'documents'), got "
                              f"shape {arr.shape} of {arr.dtype}")
    blob = arrays["paths"]
    if blob.ndim != 1 or blob.dtype != np.uint8:
        raise FormatError(f"{path}: file table 'paths': expected a 1-D uint8 array, got {blob.shape} of {blob.dtype}")
    paths = unpack_paths(blob)
    if len(paths) != n or any(not p for p in paths):
        raise FormatError(f"{path}: file table 'paths': expected {n} non-empty paths (sidecar 'documents'), "
                          f"got {len(paths)}")
    doc_class = arrays["doc_class"].astype(np.int64)
    doc_size = arrays["doc_size"].astype(np.int64)
    doc_header = arrays["doc_header"].astype(np.int64)
    for key, arr, hi in (("doc_class", doc_class, len(side["classes"])), ("doc_header", doc_header,
                                                                          len(side["headers"]))):
        bad = (arr < 0) | (arr >= hi)
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(f"{path}: file table {key}[{i}] ({paths[i]!r}): expected an index in [0, {hi}), "
                              f"got {int(arr[i])}")
    if (doc_size < 0).any():
        i = int(np.argmax(doc_size < 0))
        raise FormatError(f"{path}: file table doc_size[{i}] ({paths[i]!r}): expected >= 0, got {int(doc_size[i])}")
    return paths, doc_class, doc_size, doc_header
