"""Per-chunk checksums of a packed store's token data: the ``PREFIX.consumer.sums`` file, and its verifier.

The token data of a store (the whole ``.bin`` of a Megatron store, the data section of a ``.pbin``) is cut
into chunks of ``chunk_bytes`` bytes (the last one shorter); each chunk has a CRC-32C. The data files
themselves are not changed, so Megatron / fairseq / Modalities readers read the store as before.

Byte layout (all integers little-endian)
==========================================================================

::

    offset     size  field
    0          8     magic  b"CNSMSUMS"
    8          4     version, u32, always 1
    12         4     algorithm, u32: 1 = CRC-32C (Castagnoli, as google-crc32c computes it: reflected,
                     init and final xor 0xFFFFFFFF; crc32c(b"123456789") == 0xE3069283)
    16         8     chunk_bytes, u64: a power of two in [4096, 2**30]
    24         8     data_offset, u64: byte of the data file where the token data starts (0 for a
                     ``.bin``, 12 for a ``.pbin``); informational, for error messages and checks
    32         8     data_bytes, u64: length of the token data in bytes
    40         8     N = number of chunks, u64 = ceil(data_bytes / chunk_bytes)
    48         4N    the CRC-32C of each chunk, u32; chunk i is bytes
                     [i * chunk_bytes, min((i + 1) * chunk_bytes, data_bytes)) of the token data
    48+4N      4     CRC-32C of bytes [0, 48 + 4N) of this file (the file checks itself)
    file size = 52 + 4N

:func:`encode_sums` and :func:`decode_sums` are symmetric; decoding checks the magic, version, algorithm,
chunk size, chunk count, exact file size and the trailing CRC, and raises :class:`~consumer.errors.FormatError`
naming the file, expected vs actual. Chunks are summed while a store is written (:class:`ChunkHasher`, fed the
token bytes in order) or from a file (:func:`sums_of_file`).

:class:`ChunkVerifier` checks chunks against the sums the first time a process touches them: a map of one
byte per chunk records the chunks found intact (16 KiB chunks: 64 MB of map per TB of tokens); later reads of
them cost a lookup. A mismatch raises ``FormatError`` naming the store, the chunk and its byte range in the
data file, before any byte of the range is handed on. For a local store the chunks are read from the data file
with ``pread`` (``local_file``), never through its memory map, whose page faults on a cold file read ahead ~2 MiB
each; the chunk size (16 KiB by default) bounds what a cold random row costs beyond its own bytes.
"""

from __future__ import annotations

import os
import struct
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import google_crc32c
import numpy as np

from ..errors import FormatError, InputError, short_repr
from ..util.sets import distinct

__all__ = ["MAGIC", "VERSION", "ALGORITHMS", "DEFAULT_CHUNK_BYTES", "MIN_CHUNK_BYTES", "MAX_CHUNK_BYTES",
           "ChunkSums", "ChunkHasher", "ChunkVerifier", "BadChunk", "crc32c", "crc32c_file", "check_chunk_bytes",
           "sums_of_bytes", "sums_of_file", "encode_sums", "decode_sums", "read_sums", "sums_size"]

MAGIC = b"CNSMSUMS"
VERSION = 1
ALGORITHMS = {1: "crc32c"}
DEFAULT_CHUNK_BYTES = 1 << 14  # 16 KiB: a cold random read costs its range plus < 16 KiB (docs/packed-checksums.md)
MIN_CHUNK_BYTES = 1 << 12
MAX_CHUNK_BYTES = 1 << 30
_HEAD = struct.Struct("<8sIIQQQQ")  # magic, version, algorithm, chunk_bytes, data_offset, data_bytes, N
_TAIL = struct.Struct("<I")
_FEW = 16  # check_ranges: up to this many ranges, plain ints; more, numpy (measured crossover)
_SPAN = 8  # check_ranges: ranges over up to this many chunks are looked up in one gather
_READERS = 8  # threads reading the runs of chunks of one first touch at once (cold reads wait on the device)
# a read of a run that took longer than this waited on the device (a page-cache hit of 16 KiB takes a few µs, a
# random read of an SSD or a network file system 50 µs and more): the runs left go to the reader threads
_CACHED_READ_S = 30e-6
_READ_BYTES = 1 << 24  # bytes per read of sums_of_file (16 MiB, a multiple of every chunk size up to it)


_crc_value = google_crc32c.value  # the C function itself: one call per chunk, no Python frame around it


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC-32C of a contiguous buffer (bytes, or a numpy array's bytes), continuing ``crc`` when given."""
    if isinstance(data, memoryview):  # google-crc32c takes numpy arrays and bytes, not memoryviews
        data = np.frombuffer(data, dtype=np.uint8)
    return int(google_crc32c.extend(crc, data)) if crc else int(google_crc32c.value(data))


_FILE_READ = 1 << 24  # bytes read at a time by crc32c_file


def crc32c_file(path: str) -> str:
    """CRC-32C of a file's bytes as 8 hex digits, read through one buffer of at most 16 MiB: neither a copy of the file
    in the heap nor its pages in this process's resident set (a map of a 800 MB array would add 800 MB to it)."""
    view = memoryview(bytearray(max(1, min(_FILE_READ, os.path.getsize(path)))))  # a small file: a small buffer
    crc = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            crc = crc32c(view[:n], crc)
    return f"{crc:08x}"  # 0 for an empty file, as crc32c(b"")


def check_chunk_bytes(chunk_bytes: Any, what: str = "chunk_bytes") -> int:
    """``chunk_bytes`` as an int: a power of two in [MIN_CHUNK_BYTES, MAX_CHUNK_BYTES] (InputError otherwise)."""
    ok = isinstance(chunk_bytes, (int, np.integer)) and not isinstance(chunk_bytes, bool) and \
        MIN_CHUNK_BYTES <= int(chunk_bytes) <= MAX_CHUNK_BYTES and int(chunk_bytes) & (int(chunk_bytes) - 1) == 0
    if not ok:
        raise InputError(f"{what} must be a power of two in [{MIN_CHUNK_BYTES}, {MAX_CHUNK_BYTES}], got "
                         f"{short_repr(chunk_bytes)}")
    return int(chunk_bytes)


def sums_size(data_bytes: int, chunk_bytes: int) -> int:
    """Size in bytes of the sums file of ``data_bytes`` bytes of token data in chunks of ``chunk_bytes``."""
    return _HEAD.size + 4 * (-(-int(data_bytes) // int(chunk_bytes))) + _TAIL.size


@dataclass(frozen=True, eq=False)
class ChunkSums:
    """The decoded sums file: chunk size, where the token data lies in its file, one CRC-32C per chunk."""

    chunk_bytes: int
    data_offset: int
    data_bytes: int
    sums: np.ndarray  # uint32 [N]
    algorithm: str = "crc32c"

    def __post_init__(self) -> None:
        check_chunk_bytes(self.chunk_bytes)
        if self.data_offset < 0 or self.data_bytes < 0:
            raise InputError(f"data_offset and data_bytes must be >= 0, got {self.data_offset}, {self.data_bytes}")
        n = -(-self.data_bytes // self.chunk_bytes)
        if self.sums.shape != (n,):
            raise InputError(f"sums: expected {n} chunk sums for {self.data_bytes} bytes in chunks of "
                             f"{self.chunk_bytes}, got shape {self.sums.shape}")

    @property
    def chunks(self) -> int:
        """The number of chunks."""
        return int(self.sums.size)

    def byte_range(self, chunk: int) -> tuple[int, int]:
        """``(lo, hi)``: the bytes of the token data that chunk ``chunk`` covers (``hi`` exclusive)."""
        lo = int(chunk) * self.chunk_bytes
        return lo, min(lo + self.chunk_bytes, self.data_bytes)


def encode_sums(sums: ChunkSums) -> bytes:
    """The bytes of the sums file holding ``sums`` (layout in the module docstring)."""
    body = _HEAD.pack(MAGIC, VERSION, 1, sums.chunk_bytes, sums.data_offset, sums.data_bytes, sums.chunks) + \
        np.asarray(sums.sums, dtype="<u4").tobytes()
    return body + _TAIL.pack(crc32c(body))


def decode_sums(blob: bytes, where: Any) -> ChunkSums:
    """Parse and check a sums file's bytes; FormatError naming ``where``, expected vs actual, on any mismatch."""
    if len(blob) < _HEAD.size + _TAIL.size:
        raise FormatError(f"{where}: chunk sums: expected at least {_HEAD.size + _TAIL.size} bytes, got {len(blob)}")
    magic, version, algorithm, chunk_bytes, offset, data_bytes, n = _HEAD.unpack_from(blob)
    if magic != MAGIC:
        raise FormatError(f"{where}: chunk sums: magic expected {MAGIC!r}, got {magic!r}")
    if version != VERSION:
        raise FormatError(f"{where}: chunk sums: version expected {VERSION}, got {version}")
    if algorithm not in ALGORITHMS:
        raise FormatError(f"{where}: chunk sums: algorithm expected one of {sorted(ALGORITHMS)} (1 = crc32c), got "
                          f"{algorithm}")
    if not (MIN_CHUNK_BYTES <= chunk_bytes <= MAX_CHUNK_BYTES and chunk_bytes & (chunk_bytes - 1) == 0):
        raise FormatError(f"{where}: chunk sums: chunk_bytes expected a power of two in [{MIN_CHUNK_BYTES}, "
                          f"{MAX_CHUNK_BYTES}], got {chunk_bytes}")
    want_n = -(-data_bytes // chunk_bytes)
    if n != want_n:
        raise FormatError(f"{where}: chunk sums: chunk count expected {want_n} for {data_bytes} bytes in chunks of "
                          f"{chunk_bytes}, got {n}")
    size = _HEAD.size + 4 * n + _TAIL.size
    if len(blob) != size:
        raise FormatError(f"{where}: chunk sums: file size expected {size} bytes for {n} chunks, got {len(blob)}")
    (stored,) = _TAIL.unpack_from(blob, size - _TAIL.size)
    actual = crc32c(blob[:size - _TAIL.size])
    if stored != actual:
        raise FormatError(f"{where}: chunk sums: the file's own crc32c expected {stored:08x}, got {actual:08x}: "
                          "the sums file is damaged")
    sums = np.frombuffer(blob, dtype="<u4", count=n, offset=_HEAD.size).astype(np.uint32)
    return ChunkSums(chunk_bytes, offset, data_bytes, sums, ALGORITHMS[algorithm])


def read_sums(path: Any, expected_size: int | None = None) -> ChunkSums:
    """Read and decode the sums file at ``path`` (its size checked first when ``expected_size`` is given)."""
    if expected_size is not None:
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            raise FormatError(f"{path}: chunk sums file is missing: expected {expected_size} bytes (recorded in the "
                              "sidecar), got no file") from None
        if size != expected_size:
            raise FormatError(f"{path}: chunk sums file: size expected {expected_size} bytes (recorded in the "
                              f"sidecar), got {size}")
    with open(path, "rb") as f:
        return decode_sums(f.read(), path)


class ChunkHasher:
    """Chunk sums of a byte stream fed in order by :meth:`update` (pieces of any size); :meth:`finish` gives
    the :class:`ChunkSums` of everything fed."""

    def __init__(self, chunk_bytes: int = DEFAULT_CHUNK_BYTES, data_offset: int = 0) -> None:
        self.chunk_bytes = check_chunk_bytes(chunk_bytes)
        self.data_offset = int(data_offset)
        self._sums: list[int] = []
        self._crc = 0
        self._filled = 0  # bytes of the current chunk fed so far
        self._total = 0

    def update(self, data: Any) -> None:
        """Feed the next bytes of the token data (a bytes-like object or a contiguous numpy array)."""
        view = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else \
            np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        at, n = 0, int(view.size)
        self._total += n
        while at < n:
            take = min(n - at, self.chunk_bytes - self._filled)
            self._crc = crc32c(view[at:at + take], self._crc)
            self._filled += take
            at += take
            if self._filled == self.chunk_bytes:
                self._sums.append(self._crc)
                self._crc, self._filled = 0, 0

    def finish(self) -> ChunkSums:
        """The sums of all bytes fed (the last chunk may be shorter)."""
        sums = self._sums + ([self._crc] if self._filled else [])
        return ChunkSums(self.chunk_bytes, self.data_offset, self._total, np.array(sums, dtype=np.uint32))


def sums_of_bytes(data: Any, chunk_bytes: int = DEFAULT_CHUNK_BYTES, data_offset: int = 0) -> ChunkSums:
    """The chunk sums of a whole buffer of token data."""
    hasher = ChunkHasher(chunk_bytes, data_offset)
    hasher.update(data)
    return hasher.finish()


def sums_of_file(path: Any, data_offset: int, data_bytes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> ChunkSums:
    """The chunk sums of ``data_bytes`` bytes of the file ``path`` from byte ``data_offset`` (plain reads)."""
    hasher = ChunkHasher(chunk_bytes, data_offset)
    step = max(_READ_BYTES, hasher.chunk_bytes)
    with open(path, "rb", buffering=0) as f:
        done = 0
        while done < data_bytes:
            want = min(step, data_bytes - done)
            data = os.pread(f.fileno(), want, data_offset + done)
            if len(data) != want:
                raise FormatError(f"{path}: truncated: wanted {want} bytes at byte {data_offset + done}, "
                                  f"got {len(data)}")
            hasher.update(data)
            done += want
    return hasher.finish()


@dataclass(frozen=True)
class BadChunk:
    """A chunk whose bytes do not match its recorded sum: its number, its bytes in the data file, both sums."""

    chunk: int
    file_lo: int
    file_hi: int
    expected: int
    actual: int

    def describe(self, data_file: Any) -> str:
        """``chunk 3 (bytes 12..4108 of x.bin): crc32c expected 0x..., got 0x...``."""
        return (f"chunk {self.chunk} (bytes {self.file_lo}..{self.file_hi} of {data_file}): crc32c expected "
                f"{self.expected:08x}, got {self.actual:08x}")


class ChunkVerifier:
    """Checks a store's token data chunk by chunk, each chunk the first time it is read in this process.

    ``store`` and ``data_file`` name the store and its data file in errors; ``itemsize`` is the token width.
    The token data itself is passed to each call (``tokens``: the store's 1-D token array, a memory map, or an
    object with ``copy_ranges(out, src, cnt, dst)`` like :class:`~consumer.sources.remote_tokens.RemoteTokens`),
    so the verifier holds only the sums and the map of chunks found intact (one byte per chunk). Not locked:
    two threads touching a new chunk at once may both check it, which is harmless.

    Read by hot paths that look a row's chunks up themselves (no call per row), never written outside this class:
    ``seen`` (bytearray: ``seen[c]`` is 1 once chunk ``c`` was found intact; ``seen[-1]`` and ``seen[chunks]`` are
    always 1, so the first and last chunk of an empty range or one at the end need no bounds check),
    ``token_shift`` (token ``a`` lies in chunk ``a >> token_shift``) and ``left`` (chunks not yet found intact; 0:
    every check returns at once). A range whose first and last chunks are seen and which spans at most two chunks
    needs no :meth:`check`; any other is passed to it.
    """

    def __init__(self, sums: ChunkSums, store: Any, data_file: Any, itemsize: int, *, local_file: Any = None,
                 id_limit: int | None = None, file_stamp: object = None) -> None:
        if itemsize not in (1, 2, 4, 8):
            raise InputError(f"itemsize must be 1, 2, 4 or 8 bytes, got {short_repr(itemsize)}")
        self.sums = sums
        self.store, self.data_file, self.itemsize = store, data_file, int(itemsize)
        # local_file: chunks of a memory-mapped store are read from it with pread, not through the map, whose page
        # faults read ahead ~2 MiB of a cold file for each one (see docs/packed-checksums.md, "Cold reads")
        self.local_file = None if local_file is None else str(local_file)
        # id_limit: a chunk found intact must also hold ids < id_limit (the fetch then needs no id check of its own
        # while the data file keeps ``file_stamp``, the version the caller saw when the sums were read; compared by ==)
        self.id_limit = None if id_limit is None or int(id_limit) > 1 << 8 * self.itemsize else int(id_limit)
        self.file_stamp = file_stamp
        self._fd = -1  # local_file, opened on the first read of each process
        self._threads: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool) reading runs of chunks at once
        self._shift = sums.chunk_bytes.bit_length() - 1  # byte -> chunk
        self.token_shift = self._shift - (self.itemsize.bit_length() - 1)  # token -> chunk
        self._chunk_tokens = sums.chunk_bytes // self.itemsize
        # 1: the chunk was found intact (plain ints index a bytearray fastest); one more entry, always 1, answers
        # for the end of the data and for -1 (where an empty range may point), so lookups need no bounds checks
        self.seen = bytearray(sums.chunks) + b"\x01"
        self._map = np.frombuffer(self.seen, dtype=np.bool_)
        self.left = sums.chunks  # chunks not yet found intact; 0: every check returns at once

    def __getstate__(self) -> dict:  # the map is a view of the bytearray: rebuilt, not copied, on unpickling
        return {k: {"_fd": -1, "_threads": None}.get(k, v) for k, v in self.__dict__.items() if k != "_map"}

    def __setstate__(self, state: dict) -> None:
        for old, new in (("_seen", "seen"), ("_left", "left"), ("_tshift", "token_shift")):  # older pickles
            if old in state:
                state[new] = state.pop(old)
        self.__dict__.update(state)
        self._map = np.frombuffer(self.seen, dtype=np.bool_)

    @property
    def verified(self) -> int:
        """How many chunks were found intact so far."""
        return self.sums.chunks - self.left

    @property
    def complete(self) -> bool:
        """Every chunk was found intact in this process: checks cost nothing from now on."""
        return not self.left

    def check(self, tokens: Any, byte_lo: int, byte_hi: int) -> None:
        """Bytes ``[byte_lo, byte_hi)`` of the token data are about to be read: check the chunks they lie in
        that were not checked yet (FormatError naming the store, chunk and byte range on a mismatch)."""
        if self.left and byte_hi > byte_lo:
            lo, hi = int(byte_lo) >> self._shift, (int(byte_hi) - 1) >> self._shift
            seen = self.seen
            if not (seen[lo] and seen[hi]) or hi - lo > 1:
                if hi - lo < _FEW:
                    self._verify(tokens, [c for c in range(lo, hi + 1) if not seen[c]])
                else:
                    span = np.arange(lo, hi + 1, dtype=np.int64)
                    self._verify(tokens, span[~self._map[span]])

    def check_spans(self, tokens: Any, starts: list[int], counts: list[int]) -> None:
        """:meth:`check_ranges` for a few ranges given as Python ints (a batch of a few rows: no array is made
        unless a chunk is not verified yet)."""
        if self.left and not self._seen_all(starts, counts):
            self._verify_few(tokens, starts, counts)

    def _seen_all(self, starts: list[int], counts: list[int]) -> bool:
        """Every chunk of these ranges was found intact (plain-int lookups; an empty range looks at ``a - 1``,
        -1 being the sentinel)."""
        seen, t = self.seen, self.token_shift
        for a, c in zip(starts, counts):
            lo, hi = a >> t, (a + c - 1) >> t
            if not (seen[lo] and seen[hi]) or (hi - lo > 1 and 0 in seen[lo:hi + 1]):
                return False
        return True

    def check_ranges(self, tokens: Any, src: np.ndarray, cnt: np.ndarray, longest: int | None = None) -> None:
        """Token ranges ``[src[r], src[r] + cnt[r])`` are about to be read: :meth:`check` for all of them.
        ``longest`` (a bound on every ``cnt[r]``, as the fetch knows it: the row length) spares a step when it
        shows that no range covers more than two chunks.

        The cost after the first touch is the point: nothing once every chunk is verified; else, for a few
        ranges, plain-int lookups in the map; for many, one gather from it of every chunk of each range (a range
        over up to :data:`_SPAN` chunks: rows a few chunks long, as 32 KiB rows in 16 KiB chunks are)."""
        if not self.left:
            return
        t = self.token_shift
        if src.size <= _FEW:  # few ranges: plain ints cost less than a round of numpy calls
            starts, counts = src.tolist(), cnt.tolist()
            if not self._seen_all(starts, counts):
                self._verify_few(tokens, starts, counts)
            return
        if longest is not None and longest <= self._chunk_tokens + 1:  # each range's chunks: its first and last
            ends = src + cnt
            ends -= 1
            pair = np.concatenate((src, ends))
            pair >>= t
            look = self._map[pair]
            if np.count_nonzero(look) == look.size:  # count_nonzero: the cheapest reduction numpy has
                return
            if cnt.min() <= 0:  # an empty range has no chunk to verify (it looked at a's and a - 1's)
                empty = cnt <= 0
                look |= np.concatenate((empty, empty))
            todo = pair[~look]
            if todo.size:
                self._verify(tokens, distinct(todo))
            return
        lo, hi = src >> t, (src + cnt - 1) >> t
        span = int((hi - lo).max())
        if span < _SPAN:  # chunk j of each range, clipped to its last (an empty range: its hi, a - 1's)
            look = self._map[np.minimum(lo[:, None] + np.arange(span + 1), hi[:, None])] if span else \
                self._map[np.concatenate((lo, hi))]
            if np.count_nonzero(look) == look.size:  # count_nonzero: the cheapest reduction numpy has
                return
        self._verify_ranges(tokens, src, cnt)

    def _verify_few(self, tokens: Any, starts: list[int], counts: list[int]) -> None:
        """Verify the chunks of a few ranges not verified yet, listed with plain ints (a range over many chunks:
        :meth:`_verify_ranges`)."""
        seen, t = self.seen, self.token_shift
        todo: set[int] = set()
        for a, n in zip(starts, counts):
            if n > 0:
                lo, hi = a >> t, (a + n - 1) >> t
                if hi - lo >= _FEW:
                    self._verify_ranges(tokens, np.array(starts, dtype=np.int64), np.array(counts, dtype=np.int64))
                    return
                todo.update(c for c in range(lo, hi + 1) if not seen[c])
        if todo:
            self._verify(tokens, sorted(todo))

    def _verify_ranges(self, tokens: Any, src: np.ndarray, cnt: np.ndarray) -> None:
        """Verify exactly the chunks of the non-empty ranges not verified yet (numpy)."""
        t = self.token_shift
        keep = cnt > 0
        lo, hi = src[keep] >> t, (src[keep] + cnt[keep] - 1) >> t
        k = hi - lo + 1
        cand = np.repeat(lo - np.cumsum(k) + k, k) + np.arange(int(k.sum()))
        todo = cand[~self._map[cand]]
        if todo.size:
            self._verify(tokens, distinct(todo))

    def _runs(self, chunks: Any) -> tuple[list[int], list[int]]:
        """Runs of adjacent chunks among ``chunks`` (ascending, distinct; a list or an int64 array): the bytes
        ``[lo, hi)`` of the token data of each (Python ints for a few chunks, numpy for more)."""
        shift, end_byte = self._shift, self.sums.data_bytes
        if len(chunks) <= _FEW:
            los: list[int] = []
            his: list[int] = []
            last = -2
            for c in chunks.tolist() if isinstance(chunks, np.ndarray) else chunks:
                if c != last + 1:
                    los.append(c << shift)
                    his.append(0)
                his[-1] = min((c + 1) << shift, end_byte)
                last = c
            return los, his
        c = np.asarray(chunks, dtype=np.int64)
        cut = np.flatnonzero(c[1:] != c[:-1] + 1) + 1
        end = np.append(cut, c.size)
        return (c[np.append(0, cut)] << shift).tolist(), np.minimum((c[end - 1] + 1) << shift, end_byte).tolist()

    def _read(self, tokens: Any, los: list[int], his: list[int]) -> tuple[np.ndarray | None, list[np.ndarray]]:
        """The bytes of each run ``[lo, hi)`` (uint8 arrays), and the one buffer holding them all (None when they
        are slices of a memory map): preads of the local file or ranges of the object into one buffer (all of them
        in one concurrent call), or slices of the map itself."""
        w = self.itemsize
        if self.local_file is None and isinstance(tokens, np.ndarray):
            raw = tokens.reshape(-1).view(np.uint8)
            blocks = [raw[lo:hi] for lo, hi in zip(los, his)]
            for lo, hi, block in zip(los, his, blocks):
                if block.size != hi - lo:
                    raise FormatError(f"{self.store}: bytes {lo}..{hi} of the token data: expected {hi - lo} bytes, "
                                      f"got {block.size}")
            return None, blocks
        at = [0, *accumulate(hi - lo for lo, hi in zip(los, his))]  # where each run starts in the buffer
        if self.local_file is None:
            out = np.empty(at[-1] // w, dtype=tokens.dtype)
            tokens.copy_ranges(out, np.array(los, dtype=np.int64) // w, np.diff(at) // w,
                               np.array(at[:-1], dtype=np.int64) // w)
            whole = out.view(np.uint8)
        else:
            if self._fd < 0:  # opened here, before any reader thread needs it
                self._fd = os.open(str(self.local_file), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                weakref.finalize(self, os.close, self._fd)
            whole = np.empty(at[-1], dtype=np.uint8)
            self._pread_runs(whole, los, at)
        return whole, [whole[a:b] for a, b in zip(at, at[1:])]

    def _pread_runs(self, whole: np.ndarray, los: list[int], at: list[int]) -> None:
        """Read run ``k`` (bytes from ``los[k]``) into ``whole[at[k]:at[k + 1]]``, one run after another while the
        reads come from the page cache (a hot store's first touch: no thread hand-off, which would cost more than
        the read), the rest all in flight at once on the reader threads as soon as one read waited on the device
        (a cold store: a device serves several random reads in the time of one)."""
        view = memoryview(whole.data)
        clock = time.perf_counter
        for k, lo in enumerate(los):
            t = clock()
            self._pread(view[at[k]:at[k + 1]], lo)
            if clock() - t > _CACHED_READ_S and k + 2 < len(los):
                list(self._pool().map(self._pread, [view[a:b] for a, b in zip(at[k + 1:], at[k + 2:])], los[k + 1:]))
                return

    def _pool(self) -> ThreadPoolExecutor:
        """This process's reader threads (made on first use; a forked child makes its own, the parent's threads
        do not exist there)."""
        pool = self._threads
        if pool is None or pool[0] != os.getpid():
            pool = self._threads = (os.getpid(), ThreadPoolExecutor(_READERS, thread_name_prefix="consumer-chunks"))
        return pool[1]

    def _pread(self, into: memoryview, lo: int) -> None:
        """Fill ``into`` with the token data from byte ``lo``, read from ``local_file`` with one ``preadv`` (the
        kernel reads exactly those pages: a read at a random offset is not read ahead, unlike a page fault of a
        map)."""
        off = self.sums.data_offset
        got = os.preadv(self._fd, [into], off + lo)
        if got != len(into):
            raise FormatError(f"{self.store}: {self.data_file}: truncated: expected {len(into)} bytes at byte "
                              f"{off + lo}, got {got}")

    def _verify(self, tokens: Any, chunks: Any) -> None:
        """Check ``chunks`` (ascending, distinct; a list or an int64 array) before any byte of them is served: one
        read per run of adjacent chunks into one buffer, the CRC-32C of each chunk straight from a view of it (one
        C call per chunk, no copy), the sums compared and the verified map updated with numpy, the ids of all of
        them checked with one ``max``. The chunks before the first bad one are marked verified; the bad one raises
        :class:`~consumer.errors.FormatError` naming the store, the chunk and its byte range."""
        if not len(chunks):
            return
        los, his = self._runs(chunks)
        whole, blocks = self._read(tokens, los, his)
        size, value = self.sums.chunk_bytes, _crc_value
        views = [b[a:a + size] for b in blocks for a in range(0, b.size, size)]
        actual = [value(v) for v in views]
        first = self._first_mismatch(actual, chunks)
        if self.id_limit is not None:
            first = self._first_bad_ids(whole, blocks, views, first)
        self._mark(chunks[:first])
        if first < len(views):
            c = int(chunks[first])
            lo, hi = self.sums.byte_range(c)
            off = self.sums.data_offset
            if actual[first] != int(self.sums.sums[c]):
                bad = BadChunk(c, off + lo, off + hi, int(self.sums.sums[c]), actual[first])
                raise FormatError(f"{self.store}: {bad.describe(self.data_file)}: the store is damaged and nothing "
                                  "of this read was served (consumer verify PREFIX lists every damaged chunk)")
            self._check_ids(c, views[first])

    def _first_mismatch(self, actual: list[int], chunks: Any) -> int:
        """The index of the first chunk whose sum is not ``actual``'s, or ``len(actual)``."""
        sums = self.sums.sums
        if len(actual) <= _FEW:
            for k, c in enumerate(chunks):
                if actual[k] != sums[c]:
                    return k
            return len(actual)
        wrong = np.array(actual, dtype=np.int64) != sums[np.asarray(chunks, dtype=np.int64)]
        return int(np.argmax(wrong)) if wrong.any() else len(actual)

    def _first_bad_ids(self, whole: np.ndarray | None, blocks: list[np.ndarray], views: list[np.ndarray],
                       first: int) -> int:
        """The index of the first chunk before ``first`` holding an id >= ``id_limit`` (or a negative one), else
        ``first``: one ``max`` over the buffer (over each run of a memory map), chunk by chunk only if it fails."""
        kind, limit = f"<u{self.itemsize}", self.id_limit if self.id_limit is not None else 0
        if all(int(b.view(kind).max()) < limit for b in ([whole] if whole is not None else blocks) if b.size):
            return first
        for k, v in enumerate(views[:first]):
            if v.size and int(v.view(kind).max()) >= limit:
                return k
        return first

    def _mark(self, chunks: Any) -> None:
        """Mark ``chunks`` (distinct) verified."""
        if len(chunks) <= _FEW:
            seen = self.seen
            for c in chunks:
                if not seen[c]:
                    seen[c] = 1
                    self.left -= 1
            return
        index = np.asarray(chunks, dtype=np.int64)
        new = index[~self._map[index]]
        self._map[new] = True
        self.left -= int(new.size)

    def _check_ids(self, chunk: int, data: np.ndarray) -> None:
        """An intact chunk holding an id >= ``id_limit`` (or a negative one) was packed wrong: FormatError."""
        ids = np.ascontiguousarray(data).reshape(-1).view(np.uint8).view(f"<u{self.itemsize}")
        limit = self.id_limit if self.id_limit is not None else 0
        if ids.size and int(ids.max()) >= limit:
            bad = ids[ids >= limit][:4].astype(np.int64)
            if self.itemsize == 4:  # as the store's signed ids (int32; uint16 stores are unsigned)
                bad = np.where(bad >= 1 << (8 * self.itemsize - 1), bad - (1 << 8 * self.itemsize), bad)
            lo, hi = self.sums.byte_range(chunk)
            off = self.sums.data_offset
            raise FormatError(f"{self.store}: chunk {chunk} (bytes {off + lo}..{off + hi} of {self.data_file}): token "
                              f"ids must be in [0, {limit}), got {short_repr(bad.tolist())}; the store is damaged "
                              "(consumer verify PREFIX checks all of it)")

    def scan(self, block: np.ndarray, first_byte: int) -> list[BadChunk]:
        """Every bad chunk among those ``block`` covers (``block``: token data from byte ``first_byte``, a chunk
        boundary, to a chunk boundary or the end); intact ones are marked verified. For ``verify_packed``: the
        sums of all of them computed from views of the block, compared at once."""
        size = self.sums.chunk_bytes
        if first_byte % size:
            raise InputError(f"first_byte must be a multiple of {size}, got {first_byte}")
        raw = block.reshape(-1).view(np.uint8)
        c0 = first_byte >> self._shift
        index = np.arange(c0, c0 + -(-raw.size // size), dtype=np.int64)
        if index.size:
            lo, hi = self.sums.byte_range(int(index[-1]))
            if index[-1] >= self.sums.chunks or raw.size - (lo - first_byte) != hi - lo:
                raise FormatError(f"{self.store}: chunk {int(index[-1])}: expected {max(hi - lo, 0)} bytes of token "
                                  f"data, got {raw.size - (lo - first_byte)}")
        value = _crc_value
        actual = np.array([value(raw[a:a + size]) for a in range(0, raw.size, size)], dtype=np.int64)
        expected = self.sums.sums[index].astype(np.int64)
        wrong = actual != expected
        self._mark(index[~wrong])
        off = self.sums.data_offset
        return [BadChunk(c, off + (c << self._shift), off + self.sums.byte_range(c)[1], e, a)
                for c, e, a in zip(index[wrong].tolist(), expected[wrong].tolist(), actual[wrong].tolist())]
