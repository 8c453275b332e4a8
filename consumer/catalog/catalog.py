"""The file catalog: an embedded SQLite database (WAL mode) with one row per file ever seen.

Layout (``<cache_dir>/catalog.sqlite``, or ``:memory:`` when caching is off)::

    meta(key TEXT PRIMARY KEY, value TEXT)           -- schema version
    files(key BLOB PRIMARY KEY,                      -- the absolute path's bytes (os.fsencode): exact
          path TEXT,                                 -- the same path as text (undecodable bytes escaped)
          size INTEGER, mtime_ns INTEGER,            -- what "changed" is judged by
          extension TEXT,                            -- lower-case, without the dot ('' if none)
          description TEXT, mime TEXT,               -- raw libmagic output, NULL until computed
          sha256 TEXT,                               -- content hash, NULL unless asked for
          entropy REAL, printable REAL, zeros REAL,  -- content statistics (consumer.catalog.content), NULL until
          histogram BLOB,                            --   computed; reset to NULL when the file changes
          row_check TEXT)                            -- digest of the row (consumer.catalog.rows)

It caches the expensive libmagic results: :meth:`Catalog.sync` runs libmagic only on files that
are new, whose size or change stamp changed, or that lack the column asked for (description or MIME
type), and commits every chunk of files in its own transaction. A build killed part-way keeps what it
committed; the next one continues from there and ends with the same rows as an uninterrupted build.
Several processes may sync the same catalog at once (SQLite's locking, a busy timeout, one
``BEGIN IMMEDIATE`` transaction per chunk that reads the rows it merges with and writes them), and each
file version's libmagic columns and content are computed by one of them: a process computes a part of
its files only while it holds their work claims (``<catalog>.claims``, :mod:`consumer.util.locks`), puts
off the files another process holds, and reads the rows of a part again when one was rewritten since it
last looked (another process did it meanwhile).

The content columns (sha256, entropy, printable, zeros, histogram; see :mod:`consumer.catalog.content`) are
filled by :meth:`Catalog.ensure_content`, only for files that lack them or whose size or mtime changed;
any refresh of a changed file clears the columns it does not recompute, so no column ever describes
an older version of the file than its size and mtime.

Verified when read (see :mod:`consumer.catalog.rows`): every row carries a digest of all its columns
(``row_check``) and a row that fails it, holds a value of the wrong type or a ``path`` not derived from
its key, is treated as absent (recomputed and rewritten); the schema must be exactly this version's. A catalog
that SQLite cannot read (corrupt, truncated, not a database), of another schema version or schema, or
that SQLite finds corrupt while it is used, is moved aside (``catalog.sqlite.corrupt-<time>``, kept for
inspection) and rebuilt; an operation interrupted by such corruption runs once more on the new catalog.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator, Sequence

import numpy as np

from ..errors import FileChangedError, FormatError, InputError
from ..sources.magic import describe_files
from ..util.locks import RangeLocks, claimed, slot_of
from ..util.progress import progress_bar
from .content import READ_CHUNK, compute_content, content_stats
from .file import CatalogFile, recovering
from .rows import COLUMNS, SCHEMA_VERSION, display_path, extension_of, path_key

__all__ = ["Catalog", "CATALOG_NAME", "CLAIMS_SUFFIX", "SCHEMA_VERSION", "display_path", "path_key"]

CATALOG_NAME = "catalog.sqlite"
CLAIMS_SUFFIX = ".claims"  # <catalog>.claims: the lock file of the work claims (consumer.util.locks)
_CHUNK = 512  # files per claim (and per committed transaction when no libmagic runs)
_DESCRIBED_WRITE = 128  # libmagic rows per transaction: written while the threads describe the rest of the part
_MAGIC_COLUMNS = ("description", "mime")
_NO_ROW = (None,) * len(COLUMNS)  # an absent row: equal to no size or mtime


def _stale(paths: Sequence[str], sizes: list[int], stamps: list[int], known: dict[str, tuple], want: tuple[str, ...],
           hashes: bool, among: Sequence[int] | None = None) -> dict[tuple[str, ...], list[int]]:
    """The files (indices into ``paths``, of ``among`` or all) whose row is missing, of another version
    (size, change stamp), or lacks a column of ``want`` (or the hash, with ``hashes``), grouped by the
    libmagic columns each needs computed. ``known`` is :meth:`Catalog.rows` of them."""
    cols = {w: 2 + _MAGIC_COLUMNS.index(w) for w in want}
    stale: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(paths)) if among is None else among:
        row = known.get(paths[i])
        fresh = row is not None and row[0] == sizes[i] and row[1] == stamps[i]
        needed = tuple(w for w in want if row is None or not fresh or row[cols[w]] is None)
        if needed or row is None or not fresh or (hashes and row[4] is None):
            stale.setdefault(needed, []).append(i)
    return stale


def _regroup(need_of: dict[int, tuple[str, ...]], part: list[int]) -> dict[tuple[str, ...], list[int]]:
    """The files of ``part`` grouped by what each needs (``need_of``: file -> the columns it needs, from
    :func:`_stale`), in the order of ``part``: a look-up per file of the part, not a scan of every stale file."""
    out: dict[tuple[str, ...], list[int]] = {}
    for i in part:
        out.setdefault(need_of[i], []).append(i)
    return out


def _sha256_of(path: str, size: int, stamp: int) -> str:
    """The sha256 of the version of a file the caller listed (size, change stamp); FileChangedError when the
    file is another version now or changed while it was read (never a hash of mixed halves)."""
    st = content_stats(path)
    if (st.size, st.mtime_ns) != (size, stamp):
        raise FileChangedError(f"paths: {path!r} changed since it was listed (size {size} -> {st.size}, "
                               f"change stamp {stamp} -> {st.mtime_ns} ns); rebuild the dataset")
    return st.sha256


class Catalog(CatalogFile):
    """One SQLite catalog. ``path=None`` keeps it in memory (``cache_dir=False``)."""

    def __init__(self, path: str | None):
        self.magic_calls = 0  # libmagic calls made by this object (one per file and column computed)
        self.content_reads = 0  # files read by this object's content passes
        super().__init__(path)
        self._claims_of: tuple[int, RangeLocks] | None = None

    @property
    def _claims(self) -> RangeLocks:
        """The work claims of this process on this catalog (``<catalog>.claims``; see :func:`_claim`), reopened
        after a fork: a forked child shares its parent's open file and so would share its locks."""
        if self._claims_of is None or self._claims_of[0] != os.getpid():
            self._claims_of = (os.getpid(), RangeLocks(None if self.path is None else self.path + CLAIMS_SUFFIX))
        return self._claims_of[1]

    def _claim(self, paths: Sequence[str], todo: list[int], kind: bytes, work: Callable[[list[int]], object]) -> None:
        """Run ``work(files)`` over the files ``todo`` (indices into ``paths``) in parts of at most ``_CHUNK``, each
        part while this object holds the claims of its files for ``kind`` of work (libmagic or content): a
        file another process (or catalog object) is computing is put off until its claim is released, so that
        ``work``, which reads the catalog again first, finds it done and computes nothing twice
        (:func:`consumer.util.locks.claimed`)."""
        slots = [slot_of(kind + path_key(paths[i])) for i in todo]
        claimed(self._claims, slots, _CHUNK, lambda part: work([todo[j] for j in part]))

    def _rewritten(self, paths: Sequence[str], part: list[int], seen: dict[bytes, str]) -> bool:
        """Whether a row of the files ``part`` was written since ``seen`` (:meth:`_checks` before claiming them):
        then another process did some of them meanwhile and the caller reads their verified rows again."""
        keys = [path_key(paths[i]) for i in part]
        now = self._checks(keys)
        return any(now.get(k) != seen.get(k) for k in keys)

    def close(self) -> None:
        """Close the connection and the claims file."""
        if self._claims_of is not None:
            self._claims_of[1].close()
            self._claims_of = None
        super().close()

    @recovering
    def rows(self, paths: Sequence[str]) -> dict[str, tuple]:
        """``{path: (size, mtime_ns, description, mime, sha256)}`` for the given paths with a verified row."""
        keys = [path_key(p) for p in paths]
        found = self._fetch(keys)
        return {p: found[k][2:4] + found[k][5:8] for p, k in zip(paths, keys) if k in found}

    @recovering
    def sync(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *, want: Sequence[str] = (),
             hashes: bool = False, verbose: bool = False,
             describe: Callable[..., Iterator[tuple[str | None, str | None]]] | None = None
             ) -> tuple[list[str | None], list[str | None]]:
        """Bring the rows of ``paths`` up to date and return their (descriptions, mimes).

        A row is refreshed when it is missing, its size or mtime differ, or it lacks a column of
        ``want`` (``"description"``, ``"mime"``: libmagic runs only for those) or, with ``hashes``, its
        content hash. Every chunk of files is committed on its own. Columns not wanted may be None.
        ``describe(paths, kinds=, verbose=, chunk=)`` replaces local libmagic (remote objects are described
        from byte ranges; see :mod:`consumer.sources.object_magic`).
        """
        want = tuple(want)
        unknown = [w for w in want if w not in _MAGIC_COLUMNS]
        if unknown:
            raise InputError(f"want: unknown column(s) {unknown}; libmagic gives {list(_MAGIC_COLUMNS)}")
        sizes_l, mtimes_l = sizes.tolist(), mtimes.tolist()
        with self._reading():  # the rows and their checks as of one moment (see work)
            known = self.rows(paths)
            stale = _stale(paths, sizes_l, mtimes_l, known, want, hashes)
            need_of = {i: needed for needed, files in stale.items() for i in files}
            todo = sorted(need_of)
            seen = self._checks([path_key(paths[i]) for i in todo])
        if stale:
            bar = progress_bar(len(todo), verbose and bool(want), "libmagic")

            def work(part: list[int]) -> None:  # claimed files: compute what they still lack (another process
                if self._rewritten(paths, part, seen):  # may have done some meanwhile: read their rows again)
                    now = _stale(paths, sizes_l, mtimes_l, self.rows([paths[i] for i in part]), want, hashes, part)
                else:
                    now = _regroup(need_of, part)
                for needed, files in now.items():
                    self._refresh(paths, sizes_l, mtimes_l, files, want=needed, hashes=hashes, verbose=False,
                                  describe=describe or describe_files)
                bar.update(len(part))

            try:
                self._claim(paths, todo, b"magic\0", work)
            finally:
                bar.close()
            known = self.rows(paths)
        lost = [p for p in paths if p not in known]
        if lost:
            raise FormatError(f"catalog {self.path or '(in memory)'!r}: {len(lost)} row(s) written do not read back "
                              f"verified, e.g. {lost[0]!r} (changed by another program meanwhile?)")
        desc = [known[p][2] for p in paths]
        mime = [known[p][3] for p in paths]
        return desc, mime

    def _refresh(self, paths, sizes, mtimes, stale, *, want, hashes, verbose, describe) -> None:
        todo = [paths[i] for i in stale]
        # chunk: remote, one round of requests per part; local, at most this many per thread task (split finer
        # so that every thread has work: consumer.sources.magic.describe_files)
        results = describe(todo, kinds=want, verbose=verbose, chunk=_CHUNK) if want else None
        step = _DESCRIBED_WRITE if want else _CHUNK
        for start in range(0, len(stale), step):
            part = stale[start:start + step]
            described = [next(results) for _ in part] if results is not None else [(None, None)] * len(part)
            self.magic_calls += len(want) * len(part)
            hashed = [_sha256_of(paths[i], sizes[i], mtimes[i]) for i in part] if hashes else [None] * len(part)
            with self._writing() as conn:
                old = self._fetch([path_key(paths[i]) for i in part])
                rows = []
                for j, i in enumerate(part):
                    p = paths[i]
                    o = old.get(path_key(p), _NO_ROW)
                    same = o[2] == sizes[i] and o[3] == mtimes[i]
                    d, m = described[j]
                    if same:  # keep what is still valid and was not recomputed
                        d = d if "description" in want else o[5]
                        m = m if "mime" in want else o[6]
                    h = hashed[j] if hashes else (o[7] if same else None)
                    stats = o[8:] if same else (None,) * 4
                    rows.append((path_key(p), display_path(p), sizes[i], mtimes[i], extension_of(p), d, m, h, *stats))
                self._put(conn, rows)

    @recovering
    def ensure_content(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray, *, verbose: bool = False,
                       workers: int | None = None, chunk: int = READ_CHUNK,
                       compute: Callable[..., Generator] | None = None) -> int:
        """Compute the content columns (sha256, entropy, printable, zeros, histogram) of the files that
        lack one of them or whose stored size or mtime differ from ``sizes`` / ``mtimes`` (the caller's
        view of the files); returns how many files were read.

        Reads in ``workers`` threads, ``chunk`` bytes at a time (:func:`consumer.catalog.content.compute_content`),
        with a progress bar when ``verbose``, and commits every chunk of files on its own. A file that
        no longer has the given size and mtime raises :class:`FileChangedError` (chunks already read
        stay committed); libmagic columns of a changed file are cleared, not kept. ``compute`` (same signature as
        :func:`~consumer.catalog.content.compute_content`) replaces the local content pass (e.g. on a cluster).
        """
        n = len(paths)
        if len(sizes) != n or len(mtimes) != n:
            raise InputError(f"sizes/mtimes must have one entry per path ({n}), got {len(sizes)} and {len(mtimes)}")
        sizes_l, mtimes_l = np.asarray(sizes).tolist(), np.asarray(mtimes).tolist()
        with self._reading():  # the rows and their checks as of one moment (see work)
            state = self._content_state(paths)
            stale = [i for i, p in enumerate(paths) if state.get(p) != (sizes_l[i], mtimes_l[i], 1)]
            seen = self._checks([path_key(paths[i]) for i in stale])
        if not stale:
            return 0
        read = 0
        bar = progress_bar(len(stale), verbose, "content")

        def work(part: list[int]) -> None:  # claimed files: read those still lacking content (another process
            nonlocal read                     # may have read them meanwhile)
            todo = part
            if self._rewritten(paths, part, seen):
                now = self._content_state([paths[i] for i in part])
                todo = [i for i in part if now.get(paths[i]) != (sizes_l[i], mtimes_l[i], 1)]
            if todo:
                self._read_content(paths, sizes_l, mtimes_l, todo, workers=workers, chunk=chunk, compute=compute)
                read += len(todo)
                self.content_reads += len(todo)
            bar.update(len(part))

        try:
            self._claim(paths, stale, b"content\0", work)
        finally:
            bar.close()
        return read

    def _read_content(self, paths, sizes_l, mtimes_l, stale, *, workers, chunk, compute=None) -> None:
        """The content pass over the files ``stale`` (indices into ``paths``), committed a chunk at a time;
        ``compute`` (same signature as :func:`~consumer.catalog.content.compute_content`) replaces the local
        pass."""
        results = (compute or compute_content)([paths[i] for i in stale], verbose=False, workers=workers,
                                               chunk=chunk)
        for start in range(0, len(stale), _CHUNK):
            part = stale[start:start + _CHUNK]
            computed = []
            for i in part:
                st = next(results)
                if (st.size, st.mtime_ns) != (sizes_l[i], mtimes_l[i]):
                    results.close()
                    raise FileChangedError(
                        f"paths: {paths[i]!r} changed since it was listed (size {sizes_l[i]} -> {st.size}, "
                        f"mtime_ns {mtimes_l[i]} -> {st.mtime_ns}); rebuild the dataset")
                computed.append(st)
            with self._writing() as conn:
                old = self._fetch([path_key(paths[i]) for i in part])
                rows = []
                for i, st in zip(part, computed):
                    p = paths[i]
                    o = old.get(path_key(p), _NO_ROW)
                    same = o[2] == st.size and o[3] == st.mtime_ns  # libmagic columns still valid
                    rows.append((path_key(p), display_path(p), st.size, st.mtime_ns, extension_of(p),
                                 o[5] if same else None, o[6] if same else None, st.sha256, st.entropy, st.printable,
                                 st.zeros, st.histogram_blob()))
                self._put(conn, rows)

    def _content_state(self, paths: Sequence[str]) -> dict[str, tuple[int, int, int]]:
        """``{path: (size, mtime_ns, 1 if every content column is set else 0)}`` for the verified rows."""
        found = self._fetch([path_key(p) for p in paths])
        rows = {p: found.get(path_key(p)) for p in paths}
        return {p: (r[2], r[3], int(all(v is not None for v in r[7:]))) for p, r in rows.items() if r is not None}

    @recovering
    def content_rows(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray) -> list[tuple | None]:
        """Per path ``(sha256, entropy, printable, zeros, histogram_blob)``, or None where the catalog
        has no verified content for that version (size and mtime) of the file: never a stale value."""
        found = self._fetch([path_key(p) for p in paths])
        out: list[tuple | None] = []
        for p, s, t in zip(paths, np.asarray(sizes).tolist(), np.asarray(mtimes).tolist()):
            row = found.get(path_key(p), _NO_ROW)
            ok = row[2] == s and row[3] == t and all(v is not None for v in row[7:])
            out.append(tuple(row[7:]) if ok else None)
        return out

    @recovering
    def insert(self, paths: Sequence[str], sizes: np.ndarray, mtimes: np.ndarray,
               descriptions: Sequence[str | None] | None, mimes: Sequence[str | None] | None) -> None:
        """Store rows whose facts are already known (a packed store's file table), without libmagic."""
        n = len(paths)
        descriptions = descriptions or [None] * n
        mimes = mimes or [None] * n
        with self._writing() as conn:
            self._put(conn, [(path_key(p), display_path(p), int(s), int(t), extension_of(p), d, m, None, None, None,
                              None, None)
                             for p, s, t, d, m in zip(paths, sizes.tolist(), mtimes.tolist(), descriptions, mimes)])

    @recovering
    def merge_from(self, others: Sequence[str]) -> int:
        """Copy the rows of other catalog files into this one (the shards of ``consumer index --shard``);
        returns the rows copied. Each input is checked like any catalog (schema, and rows failing their
        check are left out); a path in two inputs keeps the last one's row."""
        copied = 0
        for other in others:
            src = Catalog(other)
            try:
                rows = list(src.verified_rows())
            finally:
                src.close()
            with self._writing() as conn:
                self._put(conn, rows)
            copied += len(rows)
        return copied

    @recovering
    def verified_rows(self) -> list[tuple]:
        """Every row that passes its check, as its :data:`~consumer.catalog.rows.COLUMNS` values."""
        return list(self._fetch(None).values())

    @recovering
    def count(self) -> int:
        """Number of rows."""
        return int(self._conn.execute("SELECT count(*) FROM main.files").fetchone()[0])

    def dump(self) -> list[tuple]:
        """Every verified row, sorted by path (for tests and diagnostics): path, size, mtime_ns, extension,
        description, mime, sha256."""
        return [r[1:8] for r in sorted(self.verified_rows())]
