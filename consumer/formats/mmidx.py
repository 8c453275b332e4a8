"""Megatron / fairseq ``MMIDIDX`` indexed datasets: ``prefix.idx`` + ``prefix.bin``.

Byte layout (all integers little-endian)
==========================================================================

``prefix.bin``: the token arrays of every sequence, back to back, in the index dtype, little-endian.
No header, no padding, no separators. Sequence *i* is ``lengths[i]`` tokens at byte ``pointers[i]``.
Its size is exactly ``sum(lengths) * itemsize``.

``prefix.idx``, Megatron flavour (Megatron-LM legacy and core, Megatron-DeepSpeed)::

    offset        size  field
    0             9     magic  b"MMIDIDX\\x00\\x00"
    9             8     version, u64, always 1
    17            1     dtype code, u8 (table below)
    18            8     N = number of sequences, u64
    26            8     M = number of document_indices entries, u64 (= documents + 1)
    34            4N    lengths, int32, in tokens
    34+4N         8N    pointers, int64, byte offsets into .bin (= exclusive cumsum of lengths * itemsize)
    34+12N        8M    document_indices, int64: starts at 0, non-decreasing, ends at N
    34+12N+8M     N     modes, int8 -- only in "multimodal" files; nothing in the header says so
    file size = 34 + 12N + 8M (+ N if multimodal)

``prefix.idx``, fairseq flavour (``MMapIndexedDataset``)::

    offset        size  field
    0             9     magic  b"MMIDIDX\\x00\\x00"
    9             8     version, u64 = 1
    17            1     dtype code, u8
    18            8     N, u64
    26            4N    sizes, int32 (tokens)
    26+4N         8N    pointers, int64 (bytes)
    file size = 26 + 12N      (no document index; we synthesise 0..N)

The two flavours share magic and version; they are told apart by the file size: fairseq iff
``size == 26 + 12N``, otherwise Megatron iff ``size == 34 + 12N + 8M`` (+ N when the caller says the
file is multimodal). No size fits both.

dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6/7 floats (refused for token data),
8 uint16, 9 uint32 and 10 uint64 (fairseq flavour only).

The reader validates everything at open (magic, version, dtype code, exact ``.idx`` size, lengths,
pointers, document index, exact ``.bin`` size) and raises :class:`~consumer.errors.FormatError` with
expected and actual values. Token access is zero-copy (views of a read-only memory map).
The writer writes to temporary files and renames them into place at :meth:`IndexedWriter.finalize`,
``.bin`` first and ``.idx`` last, so a complete-looking ``.idx`` never describes a partial ``.bin``.
"""

from __future__ import annotations

import array
import functools
import mmap
import os
import shutil
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

import numpy as np

from ..errors import FormatError, InputError, SampleIndexError, short_repr
from ..util.fileio import check_path, discard, fsync_dir, open_temp, stat_regular
from ..util.validate import int_vector, is_int
from .segments import split_segments

__all__ = [
    "MAGIC",
    "MEGATRON",
    "FAIRSEQ",
    "MMIndex",
    "IndexedReader",
    "IndexedWriter",
    "optimal_dtype",
    "read_index",
    "write_fairseq",
    "merge",
]

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
MEGATRON = "megatron"
FAIRSEQ = "fairseq"

_FAIRSEQ_HEADER = 26  # magic + version + code + N
_CHECK_WINDOW = 1 << 22  # sequences checked at a time (bounded temporaries at 10^8 sequences)
_MEGATRON_HEADER = 34  # ... + M
_INT32_MAX = 2**31 - 1

# Codes accepted for token data, per flavour. Floats (6, 7) are refused on purpose.
_MEGATRON_CODES: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int8),
    3: np.dtype(np.int16),
    4: np.dtype(np.int32),
    5: np.dtype(np.int64),
    8: np.dtype(np.uint16),
}
_FAIRSEQ_CODES: dict[int, np.dtype] = {
    **_MEGATRON_CODES,
    9: np.dtype(np.uint32),
    10: np.dtype(np.uint64),
}
_FLOAT_CODES = {6: "float64", 7: "float32 (Megatron-core) / float64 (legacy, fairseq)"}
_OTHER_MAGICS = {
    b"TNTIDX\x00\x00": "the TNTIDX 'lazy'/'cached' index format",
    b"HUFFIDX\x00": "fairseq's Huffman-coded index format",
}


# --------------------------------------------------------------------------------------------- dtype


def optimal_dtype(vocab_size: int | None) -> np.dtype:
    """Megatron's best-fitting token dtype: ``uint16`` if ``vocab_size`` is given and < 65500, else ``int32``.

    (65500, not 65536: Megatron gives vocabularies of 65500..65536 ``int32``; we match it byte for byte.)
    """
    if vocab_size is not None and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer)):
        raise InputError(f"vocab_size must be an int or None, got {short_repr(vocab_size)}")
    if vocab_size is not None and vocab_size < 65500:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def _codes_for(flavour: str) -> dict[int, np.dtype]:
    return _FAIRSEQ_CODES if flavour == FAIRSEQ else _MEGATRON_CODES


def _code_of(dtype: np.dtype, flavour: str) -> int:
    """The dtype code a writer of ``flavour`` uses for ``dtype`` (InputError if there is none)."""
    codes = _codes_for(flavour)
    for code, candidate in codes.items():
        if candidate == dtype:
            return code
    allowed = ", ".join(str(d) for d in codes.values())
    raise InputError(f"dtype must be one of {allowed} for a {flavour}-flavoured index, got {dtype}")


def _dtype_of_code(code: int, flavour: str, path: Path) -> np.dtype:
    """Decode the dtype byte, refusing floats and codes the flavour does not define."""
    codes = _codes_for(flavour)
    if code in codes:
        return codes[code]
    allowed = sorted(codes)
    if code in _FLOAT_CODES:
        why = f"code {code} is a float dtype ({_FLOAT_CODES[code]}), refused for token data"
    elif code in _FAIRSEQ_CODES:
        why = f"code {code} ({_FAIRSEQ_CODES[code]}) exists only in fairseq-flavoured files"
    else:
        why = f"code {code} is not a known dtype code"
    raise FormatError(
        f"{path}: dtype code at byte 17: expected one of {allowed} for a {flavour} index, got {code}; {why}"
    )


# ------------------------------------------------------------------------------------------ file checks


def _regular_file_size(path: Path, what: str) -> int:
    """Size of ``path``, refusing missing files and special files before anything could block."""
    return stat_regular(path, what).st_size


def _map_readonly(path: Path, size: int) -> np.ndarray:
    """Read-only uint8 memory map of a whole file; an empty array for an empty file (mmap refuses those)."""
    if size == 0:
        return np.empty(0, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", shape=(size,))


def _path_text(path: object, what: str) -> str:
    """``path`` as text: InputError naming ``what`` for a non-path, an empty path or a NUL byte."""
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"{what} must be a non-empty path, got {short_repr(path)}")
    text = check_path(path, what)
    if not isinstance(text, str) or not text:
        raise InputError(f"{what} must be a non-empty path, got {short_repr(path)}")
    return text


def _prefix_paths(prefix: str | os.PathLike[str]) -> tuple[Path, Path]:
    text = _path_text(prefix, "prefix")
    return Path(text + ".idx"), Path(text + ".bin")


# ------------------------------------------------------------------------------------------ index


@dataclass(frozen=True, eq=False)
class MMIndex:
    """A parsed and validated ``.idx`` file (arrays are read-only views of a memory map).

    Attributes:
        path: the ``.idx`` file.
        flavour: ``"megatron"`` or ``"fairseq"``.
        dtype_code: the raw dtype byte.
        dtype: token dtype (little-endian).
        lengths: int32[N], tokens per sequence.
        pointers: int64[N], byte offset of each sequence in ``.bin``.
        document_indices: int64[M], document boundaries (``arange(N + 1)`` for fairseq files).
        modes: int8[N] for multimodal files, else ``None``.
    """

    path: Path
    flavour: str
    dtype_code: int
    dtype: np.dtype
    lengths: np.ndarray
    pointers: np.ndarray
    document_indices: np.ndarray
    modes: np.ndarray | None

    @property
    def sequence_count(self) -> int:
        """N, the number of sequences."""
        return int(self.lengths.shape[0])

    @property
    def document_count(self) -> int:
        """Number of documents (``len(document_indices) - 1``)."""
        return int(self.document_indices.shape[0]) - 1

    @property
    def bin_size(self) -> int:
        """The exact size the matching ``.bin`` must have: ``sum(lengths) * itemsize``."""
        return int(self.lengths.sum(dtype=np.int64)) * self.dtype.itemsize


def _check_magic(head: bytes, path: Path) -> None:
    if head[: len(MAGIC)] == MAGIC:
        return
    if len(head) < len(MAGIC) and MAGIC.startswith(head):
        raise FormatError(
            f"{path}: truncated .idx: expected at least {_FAIRSEQ_HEADER} bytes of header, got {len(head)}"
        )
    hint = ""
    for other, name in _OTHER_MAGICS.items():
        if head.startswith(other):
            hint = f" (this looks like {name}, which is not supported)"
    raise FormatError(f"{path}: magic at byte 0: expected {MAGIC!r}, got {head[: len(MAGIC)]!r}{hint}")


def _detect_flavour(path: Path, size: int, n: int, m: int | None, multimodal: bool) -> str:
    """Flavour from the exact file size (formats.md §1.3); FormatError naming every expectation."""
    fairseq_size = _FAIRSEQ_HEADER + 12 * n
    if m is None:  # too short to even hold M
        if not multimodal and size == fairseq_size:
            return FAIRSEQ
        raise FormatError(
            f"{path}: truncated .idx: N={n} needs {fairseq_size} bytes (fairseq flavour) or at least "
            f"{_MEGATRON_HEADER + 12 * n + 8} bytes (megatron flavour), got {size}"
        )
    megatron_size = _MEGATRON_HEADER + 12 * n + 8 * m
    expected_size = megatron_size + (n if multimodal else 0)
    if size == fairseq_size:
        if multimodal:
            raise FormatError(
                f"{path}: multimodal=True but the file size {size} is that of a fairseq-flavoured index "
                f"(26 + 12*N with N={n}); a multimodal megatron index would be {expected_size} bytes"
            )
        return FAIRSEQ
    if size == expected_size:
        return MEGATRON
    hint = ""
    if not multimodal and size == megatron_size + n:
        hint = "; the size fits a multimodal index: pass multimodal=True"
    elif multimodal and size == megatron_size:
        hint = "; the size fits a non-multimodal index: pass multimodal=False"
    kind = "truncated .idx" if size < expected_size else ".idx has trailing bytes"
    mm = " + N (modes)" if multimodal else ""
    raise FormatError(
        f"{path}: {kind}: file size expected {expected_size} (megatron: 34 + 12*N + 8*M{mm} with N={n}, M={m}) "
        f"or {fairseq_size} (fairseq: 26 + 12*N), got {size}{hint}"
    )


def _check_lengths(lengths: np.ndarray, path: Path) -> None:
    if lengths.size and int(lengths.min()) < 0:
        i = int(np.argmax(lengths < 0))
        raise FormatError(f"{path}: lengths[{i}]: expected >= 0, got {int(lengths[i])}")


def _check_pointers(lengths: np.ndarray, pointers: np.ndarray, itemsize: int, path: Path) -> None:
    """pointers must equal the exclusive cumulative sum of lengths * itemsize (a window at a time: no temporary
    of the index's size)."""
    total = 0
    for lo in range(0, lengths.shape[0], _CHECK_WINDOW):
        part = lengths[lo:lo + _CHECK_WINDOW]
        expected = np.cumsum(part, dtype=np.int64)
        expected -= part
        expected += total
        expected *= itemsize
        bad = expected != pointers[lo:lo + _CHECK_WINDOW]
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                f"{path}: pointers[{lo + i}]: expected {int(expected[i])} (cumulative sum of lengths * itemsize "
                f"{itemsize}), got {int(pointers[lo + i])}"
            )
        total += int(part.sum(dtype=np.int64))


def _check_document_indices(doc_idx: np.ndarray, n: int, path: Path) -> None:
    if doc_idx.size == 0:
        raise FormatError(f"{path}: document_indices: expected at least one entry [0 ... {n}], got none (M=0)")
    if int(doc_idx[0]) != 0:
        raise FormatError(f"{path}: document_indices[0]: expected 0, got {int(doc_idx[0])}")
    for lo in range(0, doc_idx.size - 1, _CHECK_WINDOW):  # a window at a time, overlapping by one entry
        steps = np.diff(doc_idx[lo:lo + _CHECK_WINDOW + 1])
        if int(steps.min()) < 0:
            i = lo + int(np.argmax(steps < 0)) + 1
            raise FormatError(
                f"{path}: document_indices must be non-decreasing: expected document_indices[{i}] >= "
                f"{int(doc_idx[i - 1])}, got {int(doc_idx[i])}"
            )
    if int(doc_idx[-1]) != n:
        raise FormatError(
            f"{path}: document_indices[-1]: expected N = {n} (the number of sequences), got {int(doc_idx[-1])}"
        )


def _drop_pages(buf: np.ndarray) -> None:
    """Let the pages of a read-only map that a full check touched go from this process's resident set (they
    stay in the page cache and come back on the next access): at 10^8 sequences the check reads 2 GB of ``.idx``,
    of which an open reads only the lengths again."""
    mapped = getattr(buf, "_mmap", None)
    if mapped is not None and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def read_index(idx_path: str | os.PathLike[str], *, multimodal: bool = False, check: bool = True) -> MMIndex:
    """Parse and validate one ``.idx`` file (either flavour, detected by size).

    ``multimodal`` cannot be detected from the file: pass True for Megatron files written with modes.
    Raises FormatError for a wrong magic, version or dtype code, a size that fits neither flavour,
    negative lengths, pointers that are not the cumulative lengths, or a malformed document index.
    ``check=False`` checks the header and the file's size only (O(1): the arrays are mapped, not read), for a
    caller that recorded the full check of this very file before.
    """
    path = Path(_path_text(idx_path, "idx_path"))
    size = _regular_file_size(path, "idx_path")
    with open(path, "rb") as f:
        head = f.read(_MEGATRON_HEADER)
    _check_magic(head, path)
    if len(head) < _FAIRSEQ_HEADER:
        raise FormatError(f"{path}: truncated .idx: expected at least {_FAIRSEQ_HEADER} bytes of header, got {size}")
    (version,) = struct.unpack_from("<Q", head, 9)
    if version != VERSION:
        raise FormatError(f"{path}: version at byte 9: expected {VERSION}, got {version}")
    code = head[17]
    (n,) = struct.unpack_from("<Q", head, 18)
    m = struct.unpack_from("<Q", head, 26)[0] if len(head) >= _MEGATRON_HEADER else None
    flavour = _detect_flavour(path, size, n, m, multimodal)
    dtype = _dtype_of_code(code, flavour, path).newbyteorder("<")
    buf = _map_readonly(path, size)
    start = _FAIRSEQ_HEADER if flavour == FAIRSEQ else _MEGATRON_HEADER
    lengths = np.frombuffer(buf, dtype="<i4", count=n, offset=start)
    pointers = np.frombuffer(buf, dtype="<i8", count=n, offset=start + 4 * n)
    modes = None
    if flavour == FAIRSEQ:
        doc_idx = np.arange(n + 1, dtype=np.int64)
    else:
        assert m is not None  # narrowed by _detect_flavour; not user data
        doc_idx = np.frombuffer(buf, dtype="<i8", count=m, offset=start + 12 * n)
        if multimodal:
            modes = np.frombuffer(buf, dtype=np.int8, count=n, offset=start + 12 * n + 8 * m)
    if check:
        _check_lengths(lengths, path)
        _check_pointers(lengths, pointers, dtype.itemsize, path)
        _check_document_indices(doc_idx, n, path)
        _drop_pages(buf)
    return MMIndex(path, flavour, code, dtype, lengths, pointers, doc_idx, modes)


# ------------------------------------------------------------------------------------------ reader


class IndexedReader:
    """Read-only, validated, zero-copy access to ``prefix.idx`` + ``prefix.bin`` (either flavour).

    Attributes: ``index`` (:class:`MMIndex`), ``lengths``, ``pointers``, ``document_indices``,
    ``modes``, ``dtype``, ``flavour``. ``len(reader)`` is the number of sequences.
    The ``.bin`` size must be exactly ``sum(lengths) * itemsize`` (FormatError otherwise); ``tokens``, the sum of
    the lengths when a caller recorded it for this very ``.idx`` (with ``check=False``), spares adding them up
    (10^8 lengths: 400 MB read at every open). Empty datasets (N=0, empty ``.bin``) are fine.
    """

    def __init__(self, prefix: str | os.PathLike[str], *, multimodal: bool = False, check: bool = True,
                 tokens: int | None = None) -> None:
        idx_path, bin_path = _prefix_paths(prefix)
        self.prefix = os.fspath(prefix)
        self.index = read_index(idx_path, multimodal=multimodal, check=check)
        bin_size = _regular_file_size(bin_path, "prefix (.bin)")
        expected = self.index.bin_size if tokens is None or check else int(tokens) * self.dtype.itemsize
        if bin_size != expected and tokens is not None:
            expected = self.index.bin_size  # not as recorded: the lengths themselves say what it must be
        if bin_size != expected:
            kind = "truncated .bin" if bin_size < expected else ".bin has trailing bytes"
            raise FormatError(
                f"{bin_path}: {kind}: size expected {expected} (sum(lengths) = {expected // self.dtype.itemsize} "
                f"tokens * itemsize {self.dtype.itemsize}), got {bin_size}"
            )
        self._tokens = np.frombuffer(_map_readonly(bin_path, bin_size), dtype=self.dtype)

    @functools.cached_property
    def _starts(self) -> np.ndarray:
        """Element offsets of each sequence (pointers are validated multiples of itemsize); made at first use."""
        return self.index.pointers // self.dtype.itemsize

    # -- metadata --------------------------------------------------------------------------------
    @property
    def flavour(self) -> str:
        """``"megatron"`` or ``"fairseq"``."""
        return self.index.flavour

    @property
    def dtype(self) -> np.dtype:
        """Token dtype (little-endian)."""
        return self.index.dtype

    @property
    def lengths(self) -> np.ndarray:
        """int32[N]: tokens per sequence."""
        return self.index.lengths

    @property
    def pointers(self) -> np.ndarray:
        """int64[N]: byte offset of each sequence in ``.bin``."""
        return self.index.pointers

    @property
    def document_indices(self) -> np.ndarray:
        """int64[M]: document *d* is sequences ``document_indices[d] .. document_indices[d+1]-1``."""
        return self.index.document_indices

    @property
    def modes(self) -> np.ndarray | None:
        """int8[N] sequence modes of a multimodal index, else None."""
        return self.index.modes

    @property
    def tokens(self) -> np.ndarray:
        """The whole ``.bin`` as one read-only token array (zero-copy)."""
        return self._tokens

    def __len__(self) -> int:
        return self.index.sequence_count

    def __repr__(self) -> str:
        return (
            f"IndexedReader({self.prefix!r}, flavour={self.flavour!r}, dtype={self.dtype}, "
            f"sequences={len(self)}, documents={self.index.document_count})"
        )

    # -- single access ---------------------------------------------------------------------------
    def _check_seq(self, i: int) -> int:
        n = len(self)
        if not is_int(i):
            raise InputError(f"sequence index i must be an int, got {short_repr(i)}")
        if not 0 <= i < n:
            raise SampleIndexError(f"sequence index i: expected 0 <= i < {n}, got {i}")
        return int(i)

    def get(self, i: int, offset: int = 0, length: int | None = None) -> np.ndarray:
        """Tokens ``[offset, offset+length)`` of sequence ``i`` (default: to its end), as a zero-copy view."""
        i = self._check_seq(i)
        size = int(self.lengths[i])
        if length is None:
            length = size - offset
        if not (0 <= offset <= size and 0 <= length and offset + length <= size):
            raise InputError(
                f"offset/length for sequence {i}: expected 0 <= offset and offset + length <= {size}, "
                f"got offset={offset}, length={length}"
            )
        start = int(self._starts[i]) + offset
        return self._tokens[start : start + length]

    def __getitem__(self, i: int) -> np.ndarray:
        return self.get(i)

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self.get(i)

    def document(self, d: int) -> list[np.ndarray]:
        """The sequences of document ``d`` (views)."""
        count = self.index.document_count
        if not is_int(d) or not 0 <= d < count:
            raise SampleIndexError(f"document index d: expected 0 <= d < {count}, got {short_repr(d)}")
        lo, hi = int(self.document_indices[d]), int(self.document_indices[d + 1])
        return [self.get(i) for i in range(lo, hi)]

    # -- batched access --------------------------------------------------------------------------
    def read_into(
        self,
        out: np.ndarray,
        seq_ids: Sequence[int] | np.ndarray,
        offsets: Sequence[int] | np.ndarray,
        lengths: Sequence[int] | np.ndarray,
        dest: Sequence[int] | np.ndarray,
    ) -> None:
        """Copy many token ranges into a preallocated array, in one call.

        Range *r* is ``lengths[r]`` tokens of sequence ``seq_ids[r]`` starting at token ``offsets[r]``;
        it is written to ``out.reshape(-1)[dest[r] : dest[r] + lengths[r]]``. To fill row ``b`` of a
        ``[B, L]`` array starting at column ``c`` pass ``dest = b * L + c``. ``out`` must be a writeable
        C-contiguous integer array whose dtype holds the token dtype losslessly (int64 always does).
        Everything is validated (vectorised) before anything is written; no Python work per token.
        """
        flat = self._check_out(out)
        seq = int_vector("seq_ids", seq_ids)
        off = int_vector("offsets", offsets)
        cnt = int_vector("lengths", lengths)
        dst = int_vector("dest", dest)
        if not (seq.shape == off.shape == cnt.shape == dst.shape):
            raise InputError(
                f"seq_ids, offsets, lengths, dest must have the same length, got "
                f"{seq.shape[0]}, {off.shape[0]}, {cnt.shape[0]}, {dst.shape[0]}"
            )
        if seq.size == 0:
            return
        self._check_ranges(seq, off, cnt, dst, flat.shape[0])
        copy_ranges(flat, self._tokens, self._starts[seq] + off, cnt, dst)

    def _check_out(self, out: np.ndarray) -> np.ndarray:
        if not isinstance(out, np.ndarray):
            raise InputError(f"out must be a numpy array, got {type(out).__name__}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise InputError("out must be a writeable C-contiguous array")
        if not np.issubdtype(out.dtype, np.integer) or not np.can_cast(self.dtype, out.dtype, "safe"):
            raise InputError(
                f"out dtype: expected an integer dtype that holds {self.dtype} losslessly (e.g. int64), got {out.dtype}"
            )
        return out.reshape(-1)

    def _check_ranges(self, seq: np.ndarray, off: np.ndarray, cnt: np.ndarray, dst: np.ndarray, size: int) -> None:
        n = len(self)
        bad = (seq < 0) | (seq >= n)
        if bad.any():
            r = int(np.argmax(bad))
            raise SampleIndexError(f"seq_ids[{r}]: expected 0 <= id < {n}, got {int(seq[r])}")
        avail = self.lengths[seq].astype(np.int64)
        bad = (off < 0) | (cnt < 0) | (off + cnt > avail)
        if bad.any():
            r = int(np.argmax(bad))
            raise InputError(
                f"range {r} of sequence {int(seq[r])}: expected 0 <= offset and offset + length <= {int(avail[r])}, "
                f"got offset={int(off[r])}, length={int(cnt[r])}"
            )
        bad = (dst < 0) | (dst + cnt > size)
        if bad.any():
            r = int(np.argmax(bad))
            raise InputError(
                f"dest[{r}]: expected 0 <= dest and dest + length <= out.size = {size}, "
                f"got dest={int(dst[r])}, length={int(cnt[r])}"
            )


def copy_ranges(out: np.ndarray, tokens: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
    """Copy ``tokens[src[r] : src[r] + cnt[r]]`` to ``out[dst[r] : dst[r] + cnt[r]]`` for every range ``r``.

    ``out`` and ``tokens`` are 1-D; nothing is checked (callers validate). Long ranges (64 tokens or
    more on average) take one memcpy-like slice copy each; many short ranges that lie in order and densely on
    both sides (documents read back to back, as a pack reads them) one masked copy; other short ranges one
    vectorised gather. The engine's packed reads and :meth:`IndexedReader.read_into` both use it.
    """
    total = int(cnt.sum())
    if total >= 64 * cnt.size:
        _copy_ranges_loop(out, tokens, src, cnt, dst)
    elif _dense_in_order(src, cnt, dst, total):
        _copy_ranges_masked(out, tokens, src, cnt, dst)
    else:
        _copy_ranges_gather(out, tokens, src, cnt, dst)


def _dense_in_order(src: np.ndarray, cnt: np.ndarray, dst: np.ndarray, total: int) -> bool:
    """Whether the ranges follow one another without overlap on both sides, each side's span at most twice the
    tokens copied (then a mask over the spans costs less than the gather's index arrays)."""
    if cnt.size < 2 or total == 0:
        return False
    for at in (src, dst):
        if 2 * total < int(at[-1] + cnt[-1] - at[0]) or not bool(np.all(at[1:] >= at[:-1] + cnt[:-1])):
            return False
    return True


def _copy_ranges_masked(out: np.ndarray, tokens: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray,
                        ) -> None:
    """Ranges in order and not overlapping on both sides: the tokens of the source span that lie in a range,
    in order, go to the positions of the destination span that lie in one (two masks, one boolean copy)."""
    keep = cnt > 0
    src, cnt, dst = src[keep], cnt[keep], dst[keep]

    def mask(at: np.ndarray) -> tuple[int, np.ndarray]:
        runs = np.empty(2 * at.size, dtype=np.int64)  # a range, then the gap to the next one
        runs[0::2] = cnt
        runs[1:-1:2] = at[1:] - (at[:-1] + cnt[:-1])
        runs[-1] = 0
        return int(at[0]), np.repeat(np.tile(np.array([True, False]), at.size), runs)

    s0, smask = mask(src)
    d0, dmask = mask(dst)
    out[d0:d0 + dmask.size][dmask] = tokens[s0:s0 + smask.size][smask]


def _copy_ranges_loop(out: np.ndarray, tokens: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
    """One slice assignment per range (Python work per range, never per token)."""
    for s, c, d in zip(src.tolist(), cnt.tolist(), dst.tolist()):
        out[d : d + c] = tokens[s : s + c]


def _copy_ranges_gather(out: np.ndarray, tokens: np.ndarray, src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> None:
    """All ranges at once: build flat source/destination positions with repeat + cumsum, then gather."""
    total = int(cnt.sum())
    if total == 0:
        return
    starts = np.cumsum(cnt) - cnt  # position of each range inside the concatenation
    within = np.arange(total, dtype=np.int64) - np.repeat(starts, cnt)
    out[np.repeat(dst, cnt) + within] = tokens[np.repeat(src, cnt) + within]


# ------------------------------------------------------------------------------------------ writer



def _as_tokens(tokens: object, dtype: np.dtype, name: str) -> np.ndarray:
    """Tokens as a contiguous little-endian array of ``dtype``; InputError for non-integers or out-of-range ids."""
    try:
        arr = np.asarray(tokens)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{name} must be a 1-D array of integer token ids, got {short_repr(tokens)}") from None
    if arr.ndim != 1:
        raise InputError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=dtype)
    if not np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        raise InputError(f"{name} must hold integers, got dtype {arr.dtype}")
    if not np.can_cast(arr.dtype, dtype, "safe"):
        info = np.iinfo(dtype)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            bad = lo if lo < info.min else hi
            raise InputError(f"{name}: token ids must fit {dtype} [{info.min}, {info.max}], got {bad}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _check_modes(modes: np.ndarray, count: int) -> None:
    """Modes are int8 values, one per sequence."""
    if modes.shape != (count,) or (modes.size and not np.issubdtype(modes.dtype, np.integer)):
        raise InputError(f"modes: expected {count} int8 value(s), one per sequence, got {short_repr(modes.tolist())}")
    if modes.size and (int(modes.min()) < -128 or int(modes.max()) > 127):
        raise InputError(f"modes: expected int8 values in [-128, 127], got {short_repr(modes.tolist())}")


class IndexedWriter:
    """Write ``prefix.idx`` + ``prefix.bin`` atomically (Megatron flavour by default).

    ``add_document(tokens)`` appends one sequence and ends the document (one sequence per document,
    as GPT preprocessing does); ``add_item`` + ``end_document`` give finer control, and
    ``extend_item`` appends to the sequence added last (a long sequence written in pieces); ``add_index``
    appends another index's sequences and documents (same dtype required) by copying its ``.bin``.
    Data goes to temporary files in the target directory; :meth:`finalize` fsyncs them and renames
    ``.bin`` then ``.idx`` into place. Used as a context manager, a clean exit finalizes and an
    exception removes the temporary files (nothing at the final paths is touched). ``atomic=False``
    writes the final paths directly (created exclusively), for callers that write under a temporary
    prefix of their own and commit the whole store at once (so nothing is renamed twice).

    ``flavour="fairseq"`` writes the fairseq ``.idx`` (no document index; codes 9/10 allowed).
    ``multimodal=True`` (Megatron flavour only) also stores one int8 mode per sequence.
    """

    def __init__(
        self,
        prefix: str | os.PathLike[str],
        dtype: np.dtype | type | str,
        *,
        flavour: str = MEGATRON,
        multimodal: bool = False,
        atomic: bool = True,
    ) -> None:
        if flavour not in (MEGATRON, FAIRSEQ):
            raise InputError(f"flavour must be one of {MEGATRON!r}, {FAIRSEQ!r}, got {short_repr(flavour)}")
        if multimodal and flavour == FAIRSEQ:
            raise InputError("multimodal=True needs flavour='megatron' (fairseq indexes have no modes)")
        try:
            native = np.dtype(dtype)
        except TypeError:
            raise InputError(f"dtype must be a numpy integer dtype, got {short_repr(dtype)}") from None
        self._code = _code_of(native.newbyteorder("="), flavour)
        self.dtype = native.newbyteorder("<")
        self.flavour = flavour
        self.multimodal = multimodal
        self._idx_path, self._bin_path = _prefix_paths(prefix)
        self._lengths = array.array("q")
        self._doc_idx = array.array("q", [0])
        self._modes = array.array("b")
        self.atomic = atomic
        self._bin_tmp, self._bin = self._open_output(self._bin_path)
        self._state = "open"

    def _open_output(self, final: Path) -> tuple[Path, IO[bytes]]:
        """A temporary file for ``final`` (atomic), or ``final`` itself created exclusively."""
        if self.atomic:
            return open_temp(final, "prefix")
        if not (final.parent if str(final.parent) else Path(".")).is_dir():
            raise InputError(f"prefix: directory does not exist: {str(final.parent)!r}")
        return final, open(final, "xb")


    def _require_open(self) -> None:
        if self._state != "open":
            raise InputError(f"the writer for {self._idx_path} is {self._state}; no more writes are possible")

    # -- appending -------------------------------------------------------------------------------
    def add_item(self, tokens: object, mode: int = 0) -> None:
        """Append one sequence (does not end the document)."""
        self._require_open()
        arr = _as_tokens(tokens, self.dtype, "tokens")
        if arr.shape[0] > _INT32_MAX:
            raise InputError(f"tokens: a sequence holds at most {_INT32_MAX} tokens, got {arr.shape[0]}")
        if self.multimodal:
            _check_modes(np.asarray([mode]), 1)
        self._bin.write(arr.data)
        self._lengths.append(arr.shape[0])
        if self.multimodal:
            self._modes.append(int(mode))

    def extend_item(self, tokens: object) -> None:
        """Append ``tokens`` to the sequence added last by :meth:`add_item` (in the current document).

        A sequence too long to hold in memory is written in bounded pieces: ``add_item(first_piece)``,
        then ``extend_item(piece)`` for each further piece; the files are byte for byte those of one
        ``add_item`` of the whole sequence (its length and pointer are counted, not stored per piece).
        InputError when no sequence of the current document is open or the sum passes 2**31 - 1 tokens.
        """
        self._require_open()
        if len(self._lengths) <= self._doc_idx[-1]:
            raise InputError("extend_item: no sequence to extend; call add_item() first (the current document "
                             "has no sequence yet)")
        arr = _as_tokens(tokens, self.dtype, "tokens")
        total = self._lengths[-1] + arr.shape[0]
        if total > _INT32_MAX:
            raise InputError(f"tokens: a sequence holds at most {_INT32_MAX} tokens, got {total} after extend_item")
        self._bin.write(arr.data)
        self._lengths[-1] = total

    def add_segments(self, tokens: object, lengths: object, first: object) -> None:
        """Append many documents of one sequence each in one write: ``tokens`` holds segments of ``lengths``
        tokens back to back; a segment whose ``first`` is True starts a new document (ending the one before, if
        any), and only the first segment may have ``first`` False, continuing the sequence added last (a long
        document written over several calls). The documents started here stay open to that continuation: call
        :meth:`end_document` after the last one. Byte for byte the files of ``add_item``/``extend_item``/
        ``end_document`` per segment, without a Python call per document (pack writes 10^7 documents this way)."""
        self._require_open()
        if self.multimodal:
            raise InputError("add_segments: a multimodal index takes a mode per sequence: use add_item")
        head, arr, lens = split_segments(_as_tokens(tokens, self.dtype, "tokens"), lengths, first, "sequence")
        if head is not None:
            self.extend_item(head)
        if not lens.size:
            return
        if int(lens.max()) > _INT32_MAX:
            raise InputError(f"tokens: a sequence holds at most {_INT32_MAX} tokens, got {int(lens.max())}")
        if len(self._lengths) > self._doc_idx[-1]:  # the document before is complete now
            self._doc_idx.append(len(self._lengths))
        self._bin.write(arr.data)
        at = len(self._lengths)
        self._lengths.frombytes(lens.astype("=i8").tobytes())
        self._doc_idx.frombytes(np.arange(at + 1, at + lens.size, dtype="=i8").tobytes())  # all but the last end

    def open_document(self) -> bool:
        """Whether sequences were added since the last :meth:`end_document` (a document is still open)."""
        return len(self._lengths) > self._doc_idx[-1]

    def end_document(self) -> None:
        """Close the current document (its sequences are those added since the last call)."""
        self._require_open()
        self._doc_idx.append(len(self._lengths))

    def add_document(
        self,
        tokens: object,
        lengths: Sequence[int] | np.ndarray | None = None,
        modes: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Append one document: one sequence, or several given by ``lengths`` (must sum to ``len(tokens)``)."""
        self._require_open()
        arr = _as_tokens(tokens, self.dtype, "tokens")
        if lengths is None:
            lens = np.array([arr.shape[0]], dtype=np.int64)
        else:
            lens = int_vector("lengths", lengths)
            if lens.size and (int(lens.min()) < 0 or int(lens.max()) > _INT32_MAX):
                raise InputError(f"lengths: expected values in [0, {_INT32_MAX}], got {short_repr(lens.tolist())}")
            if int(lens.sum()) != arr.shape[0]:
                raise InputError(
                    f"lengths must sum to len(tokens) = {arr.shape[0]}, got sum {int(lens.sum())} "
                    f"({short_repr(lens.tolist())})"
                )
        if arr.shape[0] > _INT32_MAX and lengths is None:
            raise InputError(f"tokens: a sequence holds at most {_INT32_MAX} tokens, got {arr.shape[0]}")
        mode_arr = np.zeros(lens.shape[0], dtype=np.int64) if modes is None else int_vector("modes", modes)
        if self.multimodal:
            _check_modes(mode_arr, lens.shape[0])
        self._bin.write(arr.data)
        self._lengths.extend(lens.tolist())
        if self.multimodal:
            self._modes.extend(mode_arr.astype(np.int8).tolist())
        self._doc_idx.append(len(self._lengths))

    def add_index(self, other_prefix: str | os.PathLike[str]) -> None:
        """Append every sequence and document of another index (its dtype must equal ours: FormatError)."""
        self._require_open()
        if len(self._lengths) != self._doc_idx[-1]:
            raise InputError("add_index: the current document is not ended; call end_document() first")
        other = IndexedReader(other_prefix, multimodal=self.multimodal)
        if other.dtype != self.dtype:
            raise FormatError(
                f"add_index({os.fspath(other_prefix)!r}): dtype expected {self.dtype} (this writer), got {other.dtype}"
            )
        offset = len(self._lengths)
        self._lengths.extend(other.lengths.astype(np.int64).tolist())
        self._doc_idx.extend((other.document_indices[1:] + offset).tolist())
        if self.multimodal and other.modes is not None:
            self._modes.extend(other.modes.tolist())
        with open(Path(other.prefix + ".bin"), "rb") as src:
            shutil.copyfileobj(src, self._bin, 16 * 1024 * 1024)

    # -- finishing -------------------------------------------------------------------------------
    def _write_index(self, f: IO[bytes], window: int = 1 << 22) -> None:
        """The ``.idx`` written to ``f`` a window of ``window`` items at a time (sizes narrowed, pointers summed and
        document indices converted per window): no second copy of the index exists at any time."""
        lengths = np.frombuffer(self._lengths, dtype=np.int64) if self._lengths else np.empty(0, np.int64)
        n = lengths.shape[0]
        f.write(MAGIC + struct.pack("<QBQ", VERSION, self._code, n))
        if self.flavour == MEGATRON:
            f.write(struct.pack("<Q", len(self._doc_idx)))
        for lo in range(0, n, window):
            f.write(lengths[lo:lo + window].astype("<i4").tobytes())
        base = 0
        for lo in range(0, n, window):  # pointer i: bytes of the sequences before i
            run = lengths[lo:lo + window]
            pointers = np.empty(run.size, dtype="<i8")
            pointers[0] = base
            np.cumsum(run[:-1], out=pointers[1:])
            pointers[1:] += base
            base += int(run.sum())
            f.write((pointers * self.dtype.itemsize).astype("<i8").tobytes())
        if self.flavour == MEGATRON:
            doc_idx = np.frombuffer(self._doc_idx, dtype=np.int64)
            for lo in range(0, doc_idx.size, window):
                f.write(doc_idx[lo:lo + window].astype("<i8").tobytes())
            if self.multimodal:
                f.write(np.frombuffer(self._modes, dtype=np.int8).tobytes() if self._modes else b"")

    def finalize(self) -> None:
        """Write the ``.idx`` and move both files into place (``.bin`` first, ``.idx`` last)."""
        self._require_open()
        if self.flavour == MEGATRON and len(self._lengths) != self._doc_idx[-1]:
            raise InputError(
                f"finalize: {len(self._lengths) - self._doc_idx[-1]} sequence(s) added after the last "
                "end_document(); call end_document() first"
            )
        try:
            self._bin.flush()
            os.fsync(self._bin.fileno())
            self._bin.close()
            idx_tmp, idx_file = self._open_output(self._idx_path)
            self._idx_tmp = idx_tmp
            with idx_file:
                self._write_index(idx_file)
                idx_file.flush()
                os.fsync(idx_file.fileno())
            if self.atomic:
                if self._idx_path.exists():  # never leave a stale .idx next to a new .bin
                    os.unlink(self._idx_path)
                os.replace(self._bin_tmp, self._bin_path)
                os.replace(idx_tmp, self._idx_path)
                fsync_dir(self._idx_path.parent if str(self._idx_path.parent) else Path("."))
        except BaseException:
            self.abort()
            raise
        self._state = "finalized"

    def abort(self) -> None:
        """Discard everything written so far (removes the temporary files); safe to call twice."""
        if self._state == "aborted":
            return
        if not self._bin.closed:
            self._bin.close()
        for tmp in (self._bin_tmp, getattr(self, "_idx_tmp", None)):
            discard(tmp)
        if self._state != "finalized":
            self._state = "aborted"

    def __enter__(self) -> IndexedWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            if self._state == "open":
                self.abort()
            return
        if self._state == "open":
            self.finalize()

    def __del__(self) -> None:  # best effort: an abandoned writer leaves no temp files behind
        try:
            if getattr(self, "_state", None) == "open":
                self.abort()
        except Exception:  # noqa: BLE001 - never raise from __del__
            pass


# ------------------------------------------------------------------------------------------ helpers


def write_fairseq(
    prefix: str | os.PathLike[str], sequences: Iterable[object], dtype: np.dtype | type | str
) -> None:
    """Write ``sequences`` as a fairseq-flavoured ``prefix.idx/.bin`` (no document index)."""
    with IndexedWriter(prefix, dtype, flavour=FAIRSEQ) as writer:
        for tokens in sequences:
            writer.add_item(tokens)


def merge(prefixes: Sequence[str | os.PathLike[str]], out_prefix: str | os.PathLike[str], *,
          atomic: bool = True) -> None:
    """Concatenate indexed datasets (either flavour, same dtype) into one Megatron-flavoured store.

    Pointers are recomputed; document boundaries are kept (fairseq inputs: one document per sequence).
    ``atomic`` as for :class:`IndexedWriter`.
    """
    if isinstance(prefixes, str | os.PathLike) or len(prefixes) == 0:
        raise InputError(f"prefixes must be a non-empty list of prefixes, got {short_repr(prefixes)}")
    dtype = IndexedReader(prefixes[0]).dtype
    with IndexedWriter(out_prefix, dtype, atomic=atomic) as writer:
        for prefix in prefixes:
            writer.add_index(prefix)
