"""The file table of a packed store (``PREFIX.consumer.npz``): symmetric write and read, mapped in place.

Layout (format 2, written since 0.9): a ZIP archive as ``numpy.savez`` writes it, every member a ``.npy`` file
(no pickled objects), each member **stored** (not compressed) with its ``.npy`` bytes starting on a 64-byte
boundary of the file. numpy pads an ``.npy`` header to a multiple of 64 bytes, so every array's data is aligned
too, and an open maps the file read-only and takes each column as a view of the map: nothing is decompressed,
copied or turned into per-document Python objects, whatever the number of documents. ``numpy.load`` reads it as
any ``.npz``. Members, in store order (``D`` documents, ``B`` bytes of paths)::

    paths       uint8[B]      every source path, os.fsencode'd, joined by NUL (no NUL after the last one)
    path_at     int64[D + 1]  where each path starts in ``paths``: path i is paths[path_at[i]:path_at[i + 1] - 1],
                              path_at[0] == 0, path_at[D] == B + 1 (the layout of a PathList)
    doc_class   int32[D]      index into the sidecar's "classes"
    doc_size    int64[D]      source file size in bytes
    doc_header  int32[D]      index into the sidecar's "headers"

Alignment: the local header of each member carries one extra field of id ``0xD935`` (the one Android's zipalign
uses) whose zero bytes put the member's data on a 64-byte boundary; readers of ZIP skip fields they do not know.
Every member is ZIP64 (its sizes are 8-byte fields), so a table of any size has the same shape.

Reading checks every member's name, dtype, shape and ZIP CRC-32 (over the mapped bytes, about 4 GB/s: the table
of 10^7 documents in about 0.15 s), the path separators and offsets, and every index against the sidecar
(FormatError naming the file, the member, expected vs actual). The columns come back as read-only views of the
map; the paths as a :class:`~consumer.sources.paths.PathList` over the mapped blob and offsets (decoded one at a
time, when asked for).

Format 1 (written before 0.9) is the same members but ``paths`` and the three per-document arrays only (no
``path_at``), compressed with DEFLATE: it is still read, into memory, after refusing a member that declares more
bytes than ``D`` documents can need before anything is inflated.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..sources.paths import PathList

__all__ = ["TABLE_KEYS", "write_table", "read_table"]

TABLE_KEYS = ("paths", "path_at", "doc_class", "doc_size", "doc_header")
_V1_KEYS = ("paths", "doc_class", "doc_size", "doc_header")
_DTYPES: dict[str, np.dtype] = {"paths": np.dtype("|u1"), "path_at": np.dtype("<i8"), "doc_class": np.dtype("<i4"),
           "doc_size": np.dtype("<i8"), "doc_header": np.dtype("<i4")}
_ALIGN = 64  # bytes: each member's .npy data starts on such a boundary
_PAD_ID = 0xD935  # the ZIP extra field that carries the alignment padding (zipalign's id)
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a ZIP local file header: 30 bytes
_ZIP64_EXTRA = 20  # bytes zipfile adds to a ZIP64 member's local header (id, size, two u64 sizes)
_PATH_MAX = 4096  # bytes of one path at most (PATH_MAX), so the paths blob is bounded by the document count
_CRC_BLOCK = 1 << 24  # bytes checked at a time
_WINDOW = 1 << 22  # items checked at a time (bounded temporaries)


def write_table(path: Path, paths: Any, doc_class: Any, doc_size: Any, doc_header: Any, window: int = _WINDOW,
                ) -> None:
    """The file table (format 2, see the module docstring) at ``path``, created exclusively and fsynced.
    ``paths`` is a :class:`~consumer.sources.paths.PathList` or a sequence of ``str``; the blob and offsets are
    written ``window`` paths at a time (:meth:`~consumer.sources.paths.PathList.widths` lays them out first,
    :meth:`~consumer.sources.paths.PathList.piece` makes each run), so paths made on demand (records'
    ``container#record``) never exist all at once."""
    listed = PathList.of(paths)
    n = len(listed)
    steps = [(lo, min(lo + window, n)) for lo in range(0, n, window)]
    widths = [listed.widths(lo, hi) for lo, hi in steps]
    blob_bytes = max(int(sum(int(w.sum()) for w in widths)) - 1, 0)
    with open(path, "xb") as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            _write_member(z, f, "paths", _DTYPES["paths"], (blob_bytes,), _blob_runs(listed, steps))
            _write_member(z, f, "path_at", _DTYPES["path_at"], (n + 1,), _offset_runs(widths))
            for name, col in (("doc_class", doc_class), ("doc_size", doc_size), ("doc_header", doc_header)):
                arr = np.asarray(col).astype(_DTYPES[name], copy=False).reshape(-1)
                _write_member(z, f, name, _DTYPES[name], arr.shape,
                              (arr[lo:lo + window] for lo in range(0, arr.size, window)))
        f.flush()
        os.fsync(f.fileno())


def _blob_runs(listed: PathList, steps: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """The NUL-joined blob of ``listed``, a run of paths at a time (a NUL between runs, none after the last)."""
    for k, (lo, hi) in enumerate(steps):
        if k:
            yield np.zeros(1, dtype=np.uint8)
        yield np.ascontiguousarray(listed.piece(lo, hi).packed())


def _offset_runs(widths: list[np.ndarray]) -> Iterator[np.ndarray]:
    """``path_at`` (0, then the running sum of the widths), a run at a time."""
    yield np.zeros(1, dtype=np.int64)
    base = 0
    for w in widths:
        run = np.cumsum(w, dtype=np.int64) + base
        if run.size:
            base = int(run[-1])
        yield run


def _write_member(z: zipfile.ZipFile, f: Any, name: str, dtype: np.dtype, shape: tuple[int, ...],
                  runs: Iterable[np.ndarray]) -> None:
    """One ``.npy`` member of ``dtype`` and ``shape``, stored, its data on a 64-byte boundary of the file ``f``
    (``z``'s file), written from ``runs`` (its data in order, in pieces)."""
    info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    start = f.tell() + _LOCAL_HEADER.size + len(info.filename.encode()) + 4 + _ZIP64_EXTRA
    pad = (-start) % _ALIGN
    info.extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
    with z.open(info, "w", force_zip64=True) as out:
        np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": shape})
        written = 0
        for run in runs:
            data = np.ascontiguousarray(run, dtype=dtype)
            out.write(data.data.cast("B"))
            written += data.size
    if written != int(np.prod(shape)):
        raise ValueError(f"{name}: wrote {written} items, the header says {shape}")


def read_table(path: Path, side: dict, checked: bool = False) -> tuple[PathList, np.ndarray, np.ndarray, np.ndarray]:
    """The file table (store order): paths, class index, size, header index, all checked; a format-2 table's
    columns are read-only views of its memory map, a format-1 table's arrays are read into memory.
    ``checked``: this very file was checked whole before (the caller recorded it): a format-2 table's headers,
    dtypes and shapes are checked, not its values (nothing is read per document)."""
    n = side["documents"]
    infos = _members(path)
    if all(i.compress_type == zipfile.ZIP_STORED for i in infos.values()) and "path_at.npy" in infos:
        cols = _mapped_columns(path, infos, n, checked)
        if checked:
            return PathList(cols["paths"], cols["path_at"]), cols["doc_class"], cols["doc_size"], cols["doc_header"]
    else:
        cols = _inflated_columns(path, infos, n)
    listed = _paths(path, cols, n)
    doc_class, doc_size, doc_header = cols["doc_class"], cols["doc_size"], cols["doc_header"]
    for key, arr, hi in (("doc_class", doc_class, len(side["classes"])),
                         ("doc_header", doc_header, len(side["headers"]))):
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= hi):
            i = int(np.argmax((arr < 0) | (arr >= hi)))
            raise FormatError(f"{path}: file table {key}[{i}] ({listed[i]!r}): expected an index in [0, {hi}), "
                              f"got {int(arr[i])}")
    if doc_size.size and int(doc_size.min()) < 0:
        i = int(np.argmax(doc_size < 0))
        raise FormatError(f"{path}: file table doc_size[{i}] ({listed[i]!r}): expected >= 0, got {int(doc_size[i])}")
    return listed, doc_class, doc_size, doc_header


def _unreadable(path: Path, e: Exception) -> FormatError:
    return FormatError(f"{path}: file table: expected an .npz of plain arrays, got an unreadable file "
                       f"({type(e).__name__}: {e})")


def _members(path: Path) -> dict[str, zipfile.ZipInfo]:
    """The members of the table's ZIP directory, by name."""
    try:
        with zipfile.ZipFile(path) as z:
            return {i.filename: i for i in z.infolist()}
    except Exception as e:  # noqa: BLE001  (zipfile raises many types on damaged bytes: NotImplementedError too)
        raise _unreadable(path, e) from None


def _mapped_columns(path: Path, infos: dict[str, zipfile.ZipInfo], n: int, checked: bool = False
                    ) -> dict[str, np.ndarray]:
    """Format 2: every column a read-only view of one memory map of the file, its header checked, and its CRC-32
    unless the file was ``checked`` whole before."""
    missing = [k for k in TABLE_KEYS if k + ".npy" not in infos]
    if missing:
        raise FormatError(f"{path}: file table: expected arrays {list(TABLE_KEYS)}, missing {missing}")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        whole = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    cols = {}
    for key in TABLE_KEYS:
        info = infos[key + ".npy"]
        lo = _data_start(path, whole, info, size)
        hi = lo + info.file_size
        if not checked:
            _check_crc(path, key, whole, lo, hi, info.CRC)
        cols[key] = _npy_view(path, key, whole, lo, hi)
    _check_shapes(path, cols, n, {"path_at": n + 1})
    return cols


def _data_start(path: Path, whole: Any, info: zipfile.ZipInfo, size: int) -> int:
    """Where a stored member's bytes start: after its local header, read from the file (not the directory)."""
    at = info.header_offset
    if at < 0 or at + _LOCAL_HEADER.size > size:
        raise FormatError(f"{path}: file table member {info.filename!r}: expected a local header at byte {at}, "
                          f"got a file of {size} bytes")
    fields = _LOCAL_HEADER.unpack_from(whole, at)
    if fields[0] != b"PK\x03\x04":
        raise FormatError(f"{path}: file table member {info.filename!r}: expected a local header at byte {at}, "
                          f"got {bytes(fields[0])!r}")
    lo = at + _LOCAL_HEADER.size + fields[-2] + fields[-1]
    if lo + info.file_size > size:
        raise FormatError(f"{path}: file table member {info.filename!r}: expected {info.file_size} bytes from byte "
                          f"{lo}, got a file of {size} bytes")
    return lo


def _check_crc(path: Path, key: str, whole: Any, lo: int, hi: int, expected: int) -> None:
    """The member's CRC-32 (ZIP's) over its mapped bytes: FormatError naming the member, expected vs actual."""
    crc = 0
    view = memoryview(whole)
    try:
        for a in range(lo, hi, _CRC_BLOCK):
            crc = zlib.crc32(view[a:min(a + _CRC_BLOCK, hi)], crc)
    finally:
        view.release()
    if crc != expected:
        raise FormatError(f"{path}: file table member {key!r}: CRC-32 expected {expected:08x} (the ZIP directory), "
                          f"got {crc:08x}: the file is damaged")


def _npy_view(path: Path, key: str, whole: Any, lo: int, hi: int) -> np.ndarray:
    """The array of the ``.npy`` bytes ``whole[lo:hi]``, as a view (dtype as written, exactly as expected)."""
    head = io.BytesIO(bytes(whole[lo:min(hi, lo + 65536)]))
    try:
        version = np.lib.format.read_magic(head)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(head)
    except Exception as e:  # noqa: BLE001  (numpy raises ValueError and others on a damaged header)
        raise FormatError(f"{path}: file table member {key!r}: expected an .npy header, got an unreadable one "
                          f"({type(e).__name__}: {e})") from None
    if dtype != _DTYPES[key] or fortran or len(shape) != 1:
        raise FormatError(f"{path}: file table member {key!r}: expected a 1-D array of {_DTYPES[key].str}, got "
                          f"shape {shape} of {dtype.str}{' (Fortran order)' if fortran else ''}")
    start = lo + head.tell()
    if start + shape[0] * dtype.itemsize != hi:
        raise FormatError(f"{path}: file table member {key!r}: expected {hi - start} bytes of data after its header, "
                          f"got {shape[0]} items of {dtype.itemsize} bytes")
    if not shape[0]:
        return np.zeros(0, dtype)
    view = np.frombuffer(whole, dtype=dtype, count=shape[0], offset=start)
    return view if start % dtype.itemsize == 0 else view.copy()  # a table not written here (plain numpy.savez)


def _check_shapes(path: Path, cols: dict[str, np.ndarray], n: int, extra: dict[str, int]) -> None:
    """Each per-document column holds ``n`` integers (``extra``: other lengths by name)."""
    for key in TABLE_KEYS[1:]:
        if key not in cols:
            continue
        arr, want = cols[key], extra.get(key, n)
        if arr.shape != (want,) or not np.issubdtype(arr.dtype, np.integer):
            raise FormatError(f"{path}: file table {key!r}: expected {want} integers (sidecar 'documents'), got "
                              f"shape {arr.shape} of {arr.dtype}")
    blob = cols["paths"]
    if blob.ndim != 1 or blob.dtype != np.uint8:
        raise FormatError(f"{path}: file table 'paths': expected a 1-D uint8 array, got {blob.shape} of {blob.dtype}")


def _inflated_columns(path: Path, infos: dict[str, zipfile.ZipInfo], n: int) -> dict[str, np.ndarray]:
    """Format 1 (compressed, no ``path_at``): the arrays read into memory, sizes bounded before inflating."""
    caps = {"paths.npy": n * (_PATH_MAX + 1) + 4096, "path_at.npy": n * 8 + 4096 + 8}
    for name, m in infos.items():
        cap = caps.get(name, n * 8 + 4096)
        if m.file_size > cap:
            raise FormatError(f"{path}: file table member {name!r}: expected at most {cap} bytes for {n} "
                              f"documents, got {m.file_size} declared (refused before inflating)")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in _V1_KEYS if k not in z.files]
            if missing:
                raise FormatError(f"{path}: file table: expected arrays {list(_V1_KEYS)}, missing {missing}")
            cols = {k: z[k] for k in TABLE_KEYS if k in z.files}
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001  (zlib/zipfile/numpy raise many types on damaged bytes)
        raise _unreadable(path, e) from None
    _check_shapes(path, cols, n, {"path_at": n + 1})
    return cols


def _paths(path: Path, cols: dict[str, np.ndarray], n: int) -> PathList:
    """The paths of the table, checked: ``n`` non-empty paths, separators where the offsets say."""
    blob = cols["paths"]
    at = cols.get("path_at")
    if at is None:  # format 1: the offsets found from the separators
        listed = PathList.from_blob(blob)
        if len(listed) != n or (n and int(np.diff(listed.offsets()).min()) < 2):
            raise FormatError(f"{path}: file table 'paths': expected {n} non-empty paths (sidecar 'documents'), "
                              f"got {len(listed)}")
        return listed
    if n == 0 or int(at[0]) != 0 or int(at[-1]) != blob.size + 1 or _smallest_step(at) < 2:
        raise FormatError(f"{path}: file table 'path_at': expected {n + 1} increasing offsets from 0 to "
                          f"{blob.size + 1} ({n} non-empty paths), got {int(at[0]) if at.size else None} to "
                          f"{int(at[-1]) if at.size else None}")
    separators = sum(int(np.count_nonzero(blob[a:a + _WINDOW] == 0)) for a in range(0, blob.size, _WINDOW))
    placed = sum(int(np.count_nonzero(blob[at[a:min(a + _WINDOW, n)] - 1])) for a in range(1, n, _WINDOW))
    if separators != n - 1 or placed:
        raise FormatError(f"{path}: file table 'paths': expected {n - 1} NUL separators where 'path_at' puts them, "
                          f"got {separators} NUL bytes")
    return PathList(blob, at)


def _smallest_step(at: np.ndarray) -> int:
    """The smallest difference of neighbours of ``at`` (a window at a time: no temporary of its size)."""
    return min(int(np.diff(at[a:a + _WINDOW + 1]).min()) for a in range(0, at.size - 1, _WINDOW))
