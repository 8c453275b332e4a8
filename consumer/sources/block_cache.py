"""A bounded on-disk read-through cache of remote object blocks (LRU, atomic, verified).

Remote objects are cached in fixed-size **blocks** (block ``k`` of an object holds its bytes
``[k*B, min((k+1)*B, size))``; an object smaller than ``B`` is one block), so a later epoch reads
locally whatever an earlier one fetched, and a range of a huge object caches only the blocks it
touched. A block is keyed by ``sha256(url, ETag, size, B, k)``: an object whose ETag changed can
never be served from its old blocks. Objects without an ETag are not cached at all (nothing would
tell a changed object from its stale copy).

Layout under ``<cache_dir>/remote-v1/``: ``ab/<sha256 hex>.blk``, one file per block::

    offset  size  field
    0       4     magic b"cRB1"
    4       8     payload length, uint64 little-endian
    12      4     crc32 of the payload, uint32 little-endian
    16      n     payload (the block's bytes)

Writes go to a temporary file in the same directory and are renamed into place (``os.replace``), so
a reader sees a whole block or none; they are not fsynced: after a crash a torn block fails its
length or crc32 check, is deleted and fetched again. Every read checks magic, length and crc32.

LRU: a hit touches the file's mtime, which is the recency clock; when the cache grows past
``max_bytes`` the oldest blocks are deleted until it is below 90 % of it (one directory scan). The
bound counts payload plus header bytes. Several processes (DataLoader workers, ranks on one machine)
may share one cache directory: writes are atomic, a block deleted under a reader is a miss.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
import zlib
from pathlib import Path

from ..errors import InputError, short_repr
from ..util.fileio import temp_path

__all__ = ["BlockCache", "CACHE_SUBDIR", "block_key"]

CACHE_SUBDIR = "remote-v1"
_MAGIC = b"cRB1"
_HEADER = struct.Struct("<4sQI")
_LOW_WATER = 0.9
_STALE_TEMP_S = 600.0


def block_key(url: str, etag: str, size: int, block_bytes: int, block: int) -> str:
    """The cache key (hex sha256) of block ``block`` of ``url`` at ``etag`` (see the module docstring)."""
    text = "\n".join(("consumer-remote-block-v1", url, etag, str(int(size)), str(int(block_bytes)), str(int(block))))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


class BlockCache:
    """Blocks of remote objects under ``directory`` (created if missing), at most ``max_bytes`` on disk.

    ``hits``, ``misses``, ``corrupt`` and ``evicted`` count what happened in this process.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int) -> None:
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes <= 0:
            raise InputError(f"remote_cache must be a positive size, got {short_repr(max_bytes)}")
        self.root = Path(os.path.expanduser(os.fspath(directory))) / CACHE_SUBDIR
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cache_dir: cannot create the remote cache {str(self.root)!r}: {e.strerror}") from e
        self.max_bytes = max_bytes
        self.hits = self.misses = self.corrupt = self.evicted = 0
        self._usage = self._scan_usage()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.blk"

    def get(self, key: str, length: int) -> bytes | None:
        """The payload of block ``key`` if it is cached, whole and ``length`` bytes long; otherwise None
        (a damaged block is deleted)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except (FileNotFoundError, NotADirectoryError):
            self.misses += 1
            return None
        if len(raw) >= _HEADER.size:
            magic, n, crc = _HEADER.unpack_from(raw)
            payload = raw[_HEADER.size:]
            if magic == _MAGIC and n == length == len(payload) and zlib.crc32(payload) == crc:
                try:
                    os.utime(path)  # the LRU clock
                except OSError:
                    pass
                self.hits += 1
                return payload
        self.corrupt += 1
        self.misses += 1
        path.unlink(missing_ok=True)
        return None

    def put(self, key: str, data: bytes) -> None:
        """Store block ``key`` atomically, then evict the least recently used blocks if over the bound.
        A block larger than the whole bound is not stored."""
        total = _HEADER.size + len(data)
        if total > self.max_bytes:
            return
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        tmp = temp_path(path)
        try:
            with open(tmp, "xb") as f:
                f.write(_HEADER.pack(_MAGIC, len(data), zlib.crc32(data)))
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._usage += total
        if self._usage > self.max_bytes:
            self.evict()

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        now = time.time()
        for sub in os.scandir(self.root):
            if not sub.is_dir():
                continue
            for entry in os.scandir(sub.path):
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                if entry.name.endswith(".blk"):
                    out.append((st.st_mtime, st.st_size, Path(entry.path)))
                elif entry.name.endswith(".tmp") and now - st.st_mtime > _STALE_TEMP_S:
                    Path(entry.path).unlink(missing_ok=True)  # left by a killed writer
        return out

    def _scan_usage(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def total_bytes(self) -> int:
        """Bytes on disk now (a fresh scan, so it includes other processes' blocks)."""
        self._usage = self._scan_usage()
        return self._usage

    def evict(self) -> None:
        """Delete least recently used blocks until the cache is below 90 % of ``max_bytes``."""
        entries = sorted(self._entries(), key=lambda e: (e[0], str(e[2])))
        usage = sum(size for _, size, _ in entries)
        target = int(self.max_bytes * _LOW_WATER)
        for _, size, path in entries:
            if usage <= target:
                break
            path.unlink(missing_ok=True)
            usage -= size
            self.evicted += 1
        self._usage = usage
