"""Objects behind URLs (``s3://``, ``gs://``, ``az://``, ``https://``, ``file://``) as a
:class:`~consumer.sources.base.ByteSource`: :class:`ObjectFiles`.

One listing (:func:`~consumer.sources.urls.stat_objects`) gives every object's size, modification time and ETag;
reads are concurrent range requests through a :class:`~consumer.sources.range_reader.RemoteReader` (retries,
timeouts, an optional read-through cache under the cache directory) with the listed ETag and size checked on every
response, so an object rewritten since it was listed raises :class:`~consumer.errors.FileChangedError` naming it;
libmagic describes an object from a few byte ranges (:mod:`consumer.sources.object_magic`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import ConsumerError, RemoteError
from ..storage import Storage
from .base import ByteSource, Handoff, Ranges, check_ranges
from .paths import PathList
from .range_reader import RemoteReader
from .urls import stat_objects

__all__ = ["ObjectFiles", "reader_of"]


def reader_of(storage: Storage) -> RemoteReader:
    """The range reader ``storage`` asks for: its fsspec options, and a read-through cache of
    ``storage.remote_cache`` bytes under the cache directory when set."""
    where = storage.read_through_dir()
    return RemoteReader(storage.options, cache_dir=where, cache_bytes=storage.remote_cache if where else None)


class ObjectFiles(ByteSource):
    """Objects at ``paths`` (URLs) with the ``sizes``, modification ``stamps`` (ns, 0 when unknown) and ``etags``
    (None where the backend has none) listed, read through ``reader``. Picklable (the reader reopens its
    connections in each process)."""

    kind = "URLs"

    def __init__(self, reader: RemoteReader, paths: Sequence[str], sizes: np.ndarray, stamps: np.ndarray,
                 etags: Sequence[str | None]) -> None:
        self.reader = reader
        self.paths = paths if isinstance(paths, PathList) else PathList.of(list(paths))
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.stamps = np.asarray(stamps, dtype=np.int64)
        self.etags = list(etags)

    @classmethod
    def listed(cls, urls: Sequence[str], storage: Storage) -> ObjectFiles:
        """List ``urls`` (sizes, times, ETags) with ``storage``'s options; RemoteError when the backend cannot be
        reached (connection refused, DNS, TLS), naming the first URL."""
        try:
            listing = stat_objects(urls, storage.options)
        except ConsumerError:
            raise
        except OSError as e:  # the backends' own exception types are OSErrors
            raise RemoteError(f"fps: cannot list the objects (e.g. {urls[0]!r}): {type(e).__name__}: {e}") from e
        return cls(reader_of(storage), urls, listing.sizes, listing.mtimes_ns, listing.etags)

    def subset(self, ids: np.ndarray) -> ObjectFiles:
        """The objects ``ids``, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        return ObjectFiles(self.reader, PathList.of([self.paths[i] for i in ids.tolist()]), self.sizes[ids],
                           self.stamps[ids], [self.etags[i] for i in ids.tolist()])

    def with_paths(self, paths: Sequence[str]) -> ObjectFiles:
        """The same objects under ``paths`` (the same strings)."""
        return ObjectFiles(self.reader, PathList.of(paths), self.sizes, self.stamps, self.etags)

    def read_ranges(self, ids: Ranges, offsets: Ranges, lengths: Ranges, out: np.ndarray, at: Ranges) -> None:
        """See :meth:`ByteSource.read_ranges`: every range of the call in flight at once; each response's ETag and
        object size are checked against the listing (a response is one version of the object)."""
        ids, offsets, lengths, at = (np.asarray(x, dtype=np.int64) for x in (ids, offsets, lengths, at))
        check_ranges(len(self.paths), ids, offsets, lengths, out, at, self.sizes)
        il = ids.tolist()
        self.reader.read_ranges([self.paths[i] for i in il], offsets, lengths, out, at,
                                expected_etags=[self.etags[i] for i in il], expected_sizes=self.sizes[ids])

    def describe(self, paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = 256) -> Iterator[tuple[str | None, str | None]]:
        """libmagic from a few byte ranges of each object (see :mod:`consumer.sources.object_magic`)."""
        from .object_magic import describer  # noqa: PLC0415

        describe = describer(self.reader, self.paths, self.sizes, self.etags)
        return describe(list(paths), kinds=kinds, verbose=verbose, chunk=chunk)

    def handoff(self) -> Handoff:
        """The ETags listed (what another process checks its reads against)."""
        return {"kind": "objects", "etags": list(self.etags)}

    @classmethod
    def reopened(cls, paths: PathList, sizes: np.ndarray, stamps: np.ndarray, handoff: Handoff,
                 storage: Storage) -> ObjectFiles:
        """The objects another process listed (its :meth:`handoff`), without listing them again."""
        return cls(reader_of(storage), paths, sizes, stamps, handoff["etags"])
