"""Part files: the columns a worker of a cluster build writes into the cache directory for the client to map.

Layout under the cache directory (one folder per part)::

    parts/<kind>-<sha256>/part.json      what the part is: format, kind, name, rows, small JSON facts, and for every
                                         column its file, dtype, shape, bytes, CRC-32C and stamp; a sha256 over
                                         its own canonical JSON (``checksum``)
    parts/<kind>-<sha256>/<column>.npy   one plain ``.npy`` array per column (format 1.0, C order, no pickles):
                                         uncompressed, memory-mapped read-only where it is read
    parts/.<kind>-<sha256>.<12 hex>.tmp/ a part being written (renamed into place once complete)
    parts/<kind>-<sha256>.corrupt-<time>-<pid>/  a damaged part moved aside (kept for inspection, never read)

A part's name is given by its writer: a part of a walk is named by its **content** (:func:`content_name`: the
sha256 of its facts and of every column's bytes), so an unchanged folder walked again gives the part it gave
before; a part made from other parts is named by its **inputs** (:func:`input_name`: the names of those parts and
the settings), so a task whose inputs did not change finds its part made (:func:`find_part`) and does nothing.

**Writing** (:func:`write_part`, on a worker): a temporary folder, each column written and fsynced with its
CRC-32C and stamp recorded, ``part.json`` written and fsynced, the folder fsynced and renamed into place. Where
the name exists already (another attempt of the same task, a task run twice, an earlier build), the part there is
kept if it verifies and nothing is written; a damaged one is moved aside and ours takes its name. A killed task
leaves at most a temporary folder (``consumer cache clear`` removes it), never a partial part.

**Reading** (:func:`open_part`, on the client or a worker): ``part.json`` must carry its checksum, this format, the
name and kind asked for and, when the caller holds the :class:`PartRef` a task returned, the same CRC-32C and
bytes for every column; every column file must have its recorded size, dtype and shape, and its recorded stamp
(size, change time, inode: a file written since has another change time) or else the recorded CRC-32C over its
bytes. The device number is not compared: a shared file system shows another one on another host. A damaged part
raises :class:`~consumer.errors.FormatError` naming the file, the expected and the actual value: it is never served.
Columns of 1 MiB or more come back as read-only memory maps (processes share their pages), smaller ones are read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FormatError, InputError, short_repr
from ..formats.chunksums import crc32c_file
from ..util.fileio import fsync_dir, load_json_bounded, move_aside, temp_path, write_npy

__all__ = ["PARTS_DIR", "PART_FORMAT", "PartRef", "content_name", "input_name", "write_part", "find_part",
           "open_part", "pack_texts", "unpack_texts"]

PARTS_DIR = "parts"
PART_FORMAT = 1
_MANIFEST = "part.json"
_MMAP_MIN_BYTES = 1 << 20
_HASH_BLOCK = 1 << 24  # bytes of a column hashed at a time


@dataclass(frozen=True)
class PartRef:
    """What a task hands back for a part it wrote or found: its folder ``name`` (``<kind>-<sha256>``), ``rows``,
    small JSON ``facts``, and per column ``(crc32c hex, bytes)`` — what the reader checks the files against.
    A few hundred bytes whatever the part's size: the client joins these, never the columns."""

    name: str
    rows: int
    facts: dict = field(default_factory=dict)
    sums: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """The part's kind (``listing``, ``files``, ``headers``): its name up to the last ``-``."""
        return self.name.rpartition("-")[0]


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def content_name(kind: str, columns: dict[str, np.ndarray], facts: dict) -> str:
    """``<kind>-<sha256>`` of the facts, the columns' names, dtypes and shapes, and every column's bytes."""
    h = hashlib.sha256(_canonical({"format": PART_FORMAT, "kind": kind, "facts": facts,
                                   "columns": [[k, v.dtype.str, list(v.shape)] for k, v in columns.items()]}))
    for arr in columns.values():
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        for i in range(0, flat.size, _HASH_BLOCK):
            h.update(flat[i:i + _HASH_BLOCK].data)
    return f"{kind}-{h.hexdigest()}"


def input_name(kind: str, inputs: dict) -> str:
    """``<kind>-<sha256>`` of the canonical JSON of ``inputs`` (the parts and settings a part is made from)."""
    return f"{kind}-{hashlib.sha256(_canonical({'format': PART_FORMAT, 'kind': kind, **inputs})).hexdigest()}"


def _folder(root: str, name: str) -> str:
    if not name or os.sep in name or name.startswith("."):
        raise InputError(f"name: not a part name, got {short_repr(name)}")
    return os.path.join(root, PARTS_DIR, name)


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, max(st.st_mtime_ns, st.st_ctime_ns), st.st_dev, st.st_ino]


def _checksum(desc: dict) -> str:
    return hashlib.sha256(_canonical({k: v for k, v in desc.items() if k != "checksum"})).hexdigest()


def _write_column(path: str, arr: np.ndarray) -> dict:
    """``arr`` as a ``.npy`` file at ``path`` (fsynced); its entry in ``part.json``."""
    with open(path, "xb") as f:
        write_npy(f, arr)
        f.flush()
        os.fsync(f.fileno())
    return {"file": os.path.basename(path), "dtype": arr.dtype.str, "shape": list(arr.shape),
            "bytes": os.path.getsize(path), "crc32c": crc32c_file(path), "stamp": _stamp(os.stat(path))}


def _ref(desc: dict) -> PartRef:
    return PartRef(desc["name"], int(desc["rows"]), desc["facts"],
                   {k: (m["crc32c"], m["bytes"]) for k, m in desc["columns"].items()})


def write_part(root: str, name: str, columns: dict[str, np.ndarray], facts: dict, rows: int) -> PartRef:
    """Write the part ``name`` (see the module docstring) under the cache directory ``root``: ``columns`` (arrays),
    ``facts`` (small JSON) and ``rows`` (the files or documents it holds). Returns its :class:`PartRef`; where a
    verified part of that name exists already, that one's."""
    final = _folder(root, name)
    found = find_part(root, name)
    if found is not None:  # another attempt (or an earlier build) made it: same name, same part; nothing written
        return found
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = str(temp_path(final))
    os.makedirs(tmp)
    try:
        files = {k: _write_column(os.path.join(tmp, f"{k}.npy"), np.ascontiguousarray(v)) for k, v in columns.items()}
        desc = {"format": PART_FORMAT, "kind": name.rpartition("-")[0], "name": name, "rows": int(rows),
                "facts": facts, "columns": files, "created": time.time()}
        desc["checksum"] = _checksum(desc)
        with open(os.path.join(tmp, _MANIFEST), "x", encoding="utf-8") as f:
            json.dump(desc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
        found = find_part(root, name)
        if found is not None:  # made meanwhile by another attempt
            return found
        try:
            os.rename(tmp, final)
        except OSError:  # lost a race to a writer of the same name: its part serves if it verifies
            found = find_part(root, name)
            if found is None:
                raise
            return found
        fsync_dir(os.path.dirname(final))
        return _ref(desc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def find_part(root: str, name: str) -> PartRef | None:
    """The :class:`PartRef` of the part ``name`` when it is there and verifies (every column checked, by stamp or
    CRC-32C); None when it is not there. A damaged one is moved aside (kept for inspection) and None returned."""
    folder = _folder(root, name)
    if not os.path.lexists(folder):
        return None
    try:
        desc = _manifest(folder, name)
        for column in desc["columns"]:
            _column(folder, desc, column, None)
    except FormatError:
        try:
            move_aside(folder)
        except OSError:  # another worker moved it first
            pass
        return None
    return _ref(desc)


def _manifest(folder: str, name: str) -> dict:
    """``part.json`` of ``folder``, checked (FormatError naming it otherwise)."""
    path = os.path.join(folder, _MANIFEST)
    try:
        with open(path, "rb") as f:
            desc = load_json_bounded(f.read(), path)
    except (OSError, ValueError) as e:
        raise FormatError(f"part {path!r}: cannot be read: {e}") from None
    if not isinstance(desc, dict) or desc.get("checksum") != _checksum(desc):
        raise FormatError(f"part {path!r}: its checksum does not match its contents (damaged or edited)")
    if desc.get("format") != PART_FORMAT or desc.get("name") != name:
        raise FormatError(f"part {path!r}: expected format {PART_FORMAT} named {name!r}, got format "
                          f"{desc.get('format')!r} named {desc.get('name')!r}")
    return desc


def _column(folder: str, desc: dict, column: str, expected: tuple[str, int] | None) -> np.ndarray:
    """The verified column ``column`` of the part in ``folder`` (mapped when large); FormatError otherwise."""
    meta = desc["columns"].get(column)
    if not isinstance(meta, dict):
        raise FormatError(f"part {folder!r}: no column {column!r} (it has {sorted(desc['columns'])})")
    path = os.path.join(folder, meta["file"])
    if expected is not None and (meta["crc32c"], meta["bytes"]) != tuple(expected):
        raise FormatError(f"part {path!r}: the task wrote CRC-32C {expected[0]} over {expected[1]} bytes, the part "
                          f"records {meta['crc32c']} over {meta['bytes']} (replaced since)")
    try:
        st = os.stat(path)
    except OSError as e:
        raise FormatError(f"part {path!r}: cannot be read: {e.strerror}") from None
    if st.st_size != meta["bytes"]:
        raise FormatError(f"part {path!r}: expected {meta['bytes']} bytes, got {st.st_size} (truncated or replaced)")
    now, then = _stamp(st), meta["stamp"]
    if (now[0], now[1], now[3]) != (then[0], then[1], then[3]):  # written since it was checked: check its bytes
        got = crc32c_file(path)
        if got != meta["crc32c"]:
            raise FormatError(f"part {path!r}: expected CRC-32C {meta['crc32c']}, got {got} (damaged)")
    try:
        arr = np.load(path, mmap_mode="r" if meta["bytes"] >= _MMAP_MIN_BYTES else None, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise FormatError(f"part {path!r}: not a readable .npy file: {e}") from None
    if arr.dtype.str != meta["dtype"] or list(arr.shape) != meta["shape"]:
        raise FormatError(f"part {path!r}: expected dtype {meta['dtype']} shape {meta['shape']}, got "
                          f"{arr.dtype.str} {list(arr.shape)}")
    return arr


def open_part(root: str, ref: PartRef | str) -> dict[str, np.ndarray]:
    """Every column of the part ``ref`` (a :class:`PartRef` a task returned, whose CRC-32C values the files must
    carry, or a part name), verified as the module docstring says; FormatError naming the damaged file otherwise."""
    name = ref.name if isinstance(ref, PartRef) else ref
    folder = _folder(root, name)
    desc = _manifest(folder, name)
    if isinstance(ref, PartRef) and sorted(ref.sums) != sorted(desc["columns"]):
        raise FormatError(f"part {folder!r}: expected columns {sorted(ref.sums)}, got {sorted(desc['columns'])}")
    return {c: _column(folder, desc, c, ref.sums[c] if isinstance(ref, PartRef) else None) for c in desc["columns"]}


def pack_texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Texts as one UTF-8 blob (``surrogatepass``: any ``str`` round-trips) and int64 offsets (``len + 1``)."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    at = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=at[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), at


def unpack_texts(blob: np.ndarray, at: np.ndarray) -> list[str]:
    """The texts :func:`pack_texts` packed."""
    raw = bytes(np.asarray(blob, dtype=np.uint8))
    ends = np.asarray(at).tolist()
    return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(ends[:-1], ends[1:])]
