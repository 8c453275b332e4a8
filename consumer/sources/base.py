"""The one interface for where a dataset's bytes come from: :class:`ByteSource`.

A dataset reads the bytes of its files, describes them with libmagic, streams them for the byte predicates of SQL,
and hands them to other processes (DataLoader workers, ranks, cluster tasks) — whatever
holds them: local files, objects behind URLs, or a packed store (whose documents are ready-made tokens, memory-
mapped or read by ranges). Each of those is one implementation of :class:`ByteSource`, chosen once by
:func:`consumer.sources.open.open_source` (or by the packed-store opener); nothing outside :mod:`consumer.sources` asks
which kind it holds. The models are webdataset's ``gopen`` (one opener chosen by the URL's scheme) and httpx's
transports (one interface, one implementation per way of moving bytes).

A source is a table of files in the dataset's order (``file_id``): ``paths``, ``sizes`` (bytes) and ``stamps``
(the change stamp recorded when the files were listed: what "the file changed" is judged by), plus:

- :meth:`ByteSource.read_ranges`: many byte ranges of many files into one buffer in one call (objects: every
  range in flight at once); every file is checked to be the version listed, and a file that changed, shrank or
  vanished raises :class:`~consumer.errors.FileChangedError` naming it — it is never served;
- :meth:`ByteSource.iter_chunks`: one whole file in bounded chunks, never a mix of two versions;
- :meth:`ByteSource.describe`: raw libmagic results (description, MIME type), what the catalog stores;
- :meth:`ByteSource.choose`: the dataset's reading strategy, fixed when the source is made — rows built from the
  files' bytes (files and objects: ``files(source)``), or rows copied from a packed store's tokens
  (:class:`~consumer.sources.store.StoreFiles`: ``store(tokens)``, its :class:`~consumer.sources.store.TokenData`);
  :meth:`ByteSource.bytes_for` gives the source whose bytes a pass reads (the content pass, the byte predicates
  of SQL), refused for a store. Callers ask these; none asks which kind of source it holds;
- :meth:`ByteSource.subset` and :meth:`ByteSource.handoff`: the same files for part of the dataset, and what
  another process needs to reopen the source without listing the files again.

Sources are picklable (connections are reopened in each process).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, TypeVar

import numpy as np

from ..errors import InputError
from ..util.buffers import Scratch
from .paths import PathList
from .token_store import TokenData

__all__ = ["ByteSource", "CHUNK_BYTES", "FEW_RANGES", "Ranges", "Handoff", "Describer", "StatFiles", "check_ranges",
           "check_few_ranges"]

T = TypeVar("T")  # what a caller of ByteSource.choose makes of the source

CHUNK_BYTES = 1 << 20  # default chunk of iter_chunks
FEW_RANGES = 8  # up to this many ranges given as lists, read_ranges checks them with plain ints (no numpy round)

Ranges: TypeAlias = "np.ndarray | list[int]"  # one column of read_ranges: int64 array, or a few plain ints
Handoff: TypeAlias = "dict[str, Any]"  # ByteSource.handoff: JSON-able, read back by open.reopen_source


class Describer(Protocol):
    """What describes files with libmagic (:meth:`ByteSource.describe`, or one run on a cluster's workers): raw
    ``(description, MIME type)`` per path, in order, None for a kind not in ``kinds``."""

    def __call__(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """Describe ``paths``."""
        ...


class StatFiles(Protocol):
    """What lists local files (:func:`~consumer.sources.corpus.stat_files`, or one run on a cluster's workers):
    sizes and change stamps, ``identity`` (device, inode) filled, ``check_open`` limiting the open probes."""

    def __call__(self, paths: Sequence[str], classes: list[str] | None = None, *,
                 check_open: np.ndarray | None = None,
                 identity: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Stat ``paths``."""
        ...


class ByteSource(ABC):
    """Where the bytes of a dataset's files come from (see the module docstring).

    ``kind`` says what it is in messages (``"local files"``, ``"URLs"``, ``"in a packed store"``: it completes
    "this dataset's files are ..."); code never branches on it.
    """

    kind: ClassVar[str] = "files"

    paths: PathList
    sizes: np.ndarray
    stamps: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)

    @abstractmethod
    def subset(self, ids: np.ndarray) -> ByteSource:
        """The same source restricted to the files ``ids`` (sorted file ids), in that order."""

    @abstractmethod
    def read_ranges(self, ids: Ranges, offsets: Ranges, lengths: Ranges, out: np.ndarray, at: Ranges) -> None:
        """Copy bytes ``[offsets[j], offsets[j] + lengths[j])`` of file ``ids[j]`` to ``out[at[j]:]`` for every
        ``j`` (int64 arrays, or lists of ints; ``out`` a writable 1-D uint8 array), every file checked to be the
        version listed before and after its read, so a file rewritten during the read is refused rather than served
        half old, half new. :class:`~consumer.errors.FileChangedError` names the file that changed."""

    def iter_chunks(self, i: int, chunk: int = CHUNK_BYTES, scratch: Scratch | None = None) -> Iterator[memoryview]:
        """The bytes of file ``i`` in pieces of at most ``chunk`` bytes (one buffer reused: consume each piece
        before asking for the next; ``scratch``'s ``"read"`` buffer when given), every piece checked to be the
        version listed: a file written between two pieces raises :class:`~consumer.errors.FileChangedError` before
        the piece after the write is given."""
        size = int(self.sizes[i])
        n = min(max(int(chunk), 1), max(size, 1))
        buf = scratch.get("read", n) if scratch is not None else np.empty(n, dtype=np.uint8)
        ids = np.array([i], dtype=np.int64)
        zero = np.zeros(1, dtype=np.int64)
        if size == 0:  # nothing to read, but still the version listed (or FileChangedError)
            self.read_ranges(ids, zero, zero, buf, zero)
        for start in range(0, size, buf.size):
            n = min(buf.size, size - start)
            self.read_ranges(ids, np.array([start], dtype=np.int64), np.array([n], dtype=np.int64), buf, zero)
            yield buf.data[:n]

    @abstractmethod
    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """Raw libmagic ``(description, MIME type)`` of each of ``paths`` (paths of this source), in order; a kind
        not in ``kinds`` comes back as None. This is the ``describe`` :meth:`Catalog.sync` calls."""

    @abstractmethod
    def with_paths(self, paths: Sequence[str]) -> ByteSource:
        """The same files under ``paths`` (equal strings; e.g. a list sharing the blob of a corpus's paths)."""

    def check_readable(self) -> None:
        """Prove every file can be read (a build calls it before spending time on the files); by default the
        listing proved it."""
        return None

    def close(self) -> None:
        """Release what reads keep open between calls (local files: their descriptors); a later read opens them
        again. By default nothing is kept."""
        return None

    def handoff(self) -> Handoff | None:
        """What another process needs, beside the paths, sizes and stamps of an index cache entry, to reopen this
        source without listing its files (:func:`consumer.sources.open.reopen_source`; JSON-able), or None when it
        needs nothing more."""
        return None

    def choose(self, *, files: Callable[[ByteSource], T], store: Callable[[TokenData], T]) -> T:
        """The reading strategy of the dataset, chosen once with its source: ``files(self)`` for files and objects
        (rows are built from their bytes, file facts come from the durable catalog), ``store(tokens)`` for a packed
        store (rows are copied from its tokens, file facts from its table)."""
        return files(self)

    def bytes_for(self, what: str) -> ByteSource:
        """This source, whose bytes ``what`` (e.g. ``"duplicates()"``) reads; a packed store refuses (InputError
        naming ``what``)."""
        return self


def check_ranges(n_files: int, ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, out: np.ndarray,
                 at: np.ndarray, sizes: np.ndarray) -> None:
    """InputError unless the ranges of :meth:`ByteSource.read_ranges` are well formed: file ids in range, ranges
    inside each file's size, destinations inside ``out``."""
    if not (ids.shape == offsets.shape == lengths.shape == at.shape) or ids.ndim != 1:
        raise InputError(f"ids, offsets, lengths and at must be 1-D of one length, got shapes {ids.shape}, "
                         f"{offsets.shape}, {lengths.shape}, {at.shape}")
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1 or not out.flags.writeable:
        raise InputError(f"out must be a writable 1-D numpy uint8 array, got {type(out).__name__}")
    if not ids.size:
        return
    if int(ids.min()) < 0 or int(ids.max()) >= n_files:
        raise InputError(f"ids must be file ids in [0, {n_files}), got {int(ids.min())}..{int(ids.max())}")
    bad = np.flatnonzero((offsets < 0) | (lengths < 0) | (offsets + lengths > sizes[ids]))
    if bad.size:
        j = int(bad[0])
        raise InputError(f"range {int(offsets[j])}+{int(lengths[j])} of file {int(ids[j])} is outside its "
                         f"{int(sizes[ids[j]])} bytes")
    if int(at.min()) < 0 or int((at + lengths).max()) > out.size:
        raise InputError(f"at + lengths must stay inside out ({out.size} bytes)")


def check_few_ranges(n_files: int, ids: list[int], offsets: list[int], lengths: list[int], out: np.ndarray,
                     at: list[int], sizes: np.ndarray) -> None:
    """:func:`check_ranges` for a few ranges given as lists of ints (a batch of one or four rows): the same
    refusals, with plain ints."""
    if not (len(ids) == len(offsets) == len(lengths) == len(at)):
        raise InputError(f"ids, offsets, lengths and at must be 1-D of one length, got lengths {len(ids)}, "
                         f"{len(offsets)}, {len(lengths)}, {len(at)}")
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1 or not out.flags.writeable:
        raise InputError(f"out must be a writable 1-D numpy uint8 array, got {type(out).__name__}")
    for i, lo, n, q in zip(ids, offsets, lengths, at):
        if not 0 <= i < n_files:
            raise InputError(f"ids must be file ids in [0, {n_files}), got {i}")
        if lo < 0 or n < 0 or lo + n > sizes[i]:
            raise InputError(f"range {lo}+{n} of file {i} is outside its {int(sizes[i])} bytes")
        if q < 0 or q + n > out.size:
            raise InputError(f"at + lengths must stay inside out ({out.size} bytes)")
