"""A packed store's chunk sums: the ``PREFIX.consumer.sums`` file next to the store, and its sidecar entry.

The file's byte layout and the verifier are in :mod:`consumer.formats.chunksums`; this module ties them to a
store. The sidecar (``PREFIX.consumer.json``) records the file in an optional field::

    chunksums   {"name": file name when written (informational), "size": exact bytes (checked at open),
                 "algorithm": "crc32c", "chunk_bytes": chunk size in bytes}

It is a field of its own, not an entry of ``files``, so a consumer version that predates it still opens the
store (it ignores the field), and Megatron / fairseq / Modalities readers never see the file at all.

- Written by every pack and merge (:func:`~consumer.packed.write.pack` sums the tokens as it writes them;
  ``merge_packed`` sums the merged ``.bin`` once written), committed with the store's other files, before
  the sidecar.
- At open (:func:`load_verifier`): a sidecar with the field needs the file, with the recorded size, decoding
  cleanly and describing exactly the store's token data (FormatError naming the file otherwise: a deleted
  sums file never turns a store into an unchecked one). A sidecar without it (a store packed before
  per-chunk sums existed) opens with a :class:`~consumer.errors.ConsumerWarning` and keeps the checks it
  always had: the fetch's id-range check and ``verify_packed``'s sha256.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConsumerWarning, FormatError, short_repr
from ..formats.chunksums import (
    MAX_CHUNK_BYTES,
    MIN_CHUNK_BYTES,
    ChunkSums,
    ChunkVerifier,
    decode_sums,
    encode_sums,
    read_sums,
)
from ..formats.pbin import HEADER_SIZE
from ..sources.version import FileVersion
from ..tokens.vocab import Vocab
from ..util.fileio import atomic_write_bytes

__all__ = ["SUMS_SUFFIX", "SIDECAR_KEY", "data_offset", "data_file_suffix", "write_sums_file", "sidecar_entry",
           "check_entry", "warn_unchecked", "load_verifier", "verifier_from_bytes"]

SUMS_SUFFIX = ".consumer.sums"
SIDECAR_KEY = "chunksums"


def data_offset(fmt: str) -> int:
    """Byte of the data file where a ``fmt`` store's token data starts (``.bin``: 0, ``.pbin``: its header)."""
    return 0 if fmt == "megatron" else HEADER_SIZE


def data_file_suffix(fmt: str) -> str:
    """The suffix of the file holding a ``fmt`` store's tokens."""
    return ".bin" if fmt == "megatron" else ".pbin"


def write_sums_file(path: Path, sums: ChunkSums) -> None:
    """Write ``sums`` to ``path`` (fsynced)."""
    atomic_write_bytes(path, encode_sums(sums))


def sidecar_entry(name: str, size: int, sums: ChunkSums) -> dict:
    """The sidecar's ``chunksums`` field for a sums file ``name`` of ``size`` bytes."""
    return {"name": name, "size": int(size), "algorithm": sums.algorithm, "chunk_bytes": int(sums.chunk_bytes)}


def check_entry(side: dict, where: Any) -> dict | None:
    """The sidecar's ``chunksums`` field, checked (None when absent: an older store)."""
    entry = side.get(SIDECAR_KEY)
    if entry is None:
        return None
    ok = isinstance(entry, dict) and isinstance(entry.get("name"), str) and type(entry.get("size")) is int \
        and entry.get("algorithm") == "crc32c" and type(entry.get("chunk_bytes")) is int \
        and MIN_CHUNK_BYTES <= entry["chunk_bytes"] <= MAX_CHUNK_BYTES
    if not ok:
        raise FormatError(f"{where}: sidecar field {SIDECAR_KEY!r}: expected {{'name': file name, 'size': int, "
                          f"'algorithm': 'crc32c', 'chunk_bytes': int}}, got {short_repr(entry)}")
    return entry


def _verifier(sums: ChunkSums, entry: dict, side: dict, where: Any, sums_file: Any, data_file: Any, itemsize: int,
              data_bytes: int, **local: Any) -> ChunkVerifier:
    offset = data_offset(side["store"])
    for what, want, got in (("chunk_bytes", entry["chunk_bytes"], sums.chunk_bytes),
                            ("data_offset", offset, sums.data_offset), ("data_bytes", data_bytes, sums.data_bytes)):
        if want != got:
            raise FormatError(f"{sums_file}: chunk sums: {what} expected {want} (the store's token data), got {got}")
    return ChunkVerifier(sums, where, data_file, itemsize, **local)


def warn_unchecked(where: Any) -> None:
    """Warn that the store at ``where`` has no chunk sums: it opens with the checks it always had."""
    warnings.warn(f"{where}: this store was packed before per-chunk checksums existed (no {SIDECAR_KEY!r} in its "
                  "sidecar): its chunks are not checked when first read; the fetch still refuses ids outside the "
                  "vocabulary and 'consumer verify' still checks its sha256. Re-pack it to have every chunk "
                  "checked", ConsumerWarning, stacklevel=3)


def load_verifier(prefix: Path, side: dict, itemsize: int, data_bytes: int) -> ChunkVerifier | None:
    """The verifier of the local store at ``prefix`` (sidecar ``side``; ``data_bytes`` of tokens of width
    ``itemsize``), or None with a warning for a store packed before per-chunk sums."""
    entry = check_entry(side, prefix)
    if entry is None:
        warn_unchecked(prefix)
        return None
    path = prefix.parent / (prefix.name + SUMS_SUFFIX)
    sums = read_sums(path, entry["size"])
    data_file = prefix.parent / (prefix.name + data_file_suffix(side["store"]))
    st = os.stat(data_file)  # the chunks are read from the file itself (pread: no read-ahead), ids checked with them
    return _verifier(sums, entry, side, prefix, path, data_file, itemsize, data_bytes, local_file=data_file,
                     id_limit=Vocab(side["n_bytes"]).size, file_stamp=FileVersion.of(st))


def verifier_from_bytes(prefix: str, side: dict, blob: bytes, itemsize: int, data_bytes: int) -> ChunkVerifier:
    """The verifier of a store at the URL ``prefix`` from its sums file's bytes (its size checked already)."""
    entry = check_entry(side, prefix)
    if entry is None:
        raise FormatError(f"{prefix}: sidecar has no {SIDECAR_KEY!r} field")
    url = prefix + SUMS_SUFFIX
    return _verifier(decode_sums(blob, url), entry, side, prefix, url, prefix + data_file_suffix(side["store"]),
                     itemsize, data_bytes)

