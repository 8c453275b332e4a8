"""Concurrent, verified range reads from remote objects (S3, GCS, Azure, HTTP) into numpy buffers.

:class:`RemoteReader` serves a whole batch of byte ranges with one call: every range of the call is
in flight at once (up to ``concurrency`` requests) from **one asyncio event loop** (fsspec's I/O
loop), not one blocking GET after another. Bytes land directly in the caller's ``uint8`` buffer, so
the vectorised token path that serves local files serves remote ones unchanged.

Per backend:

- ``s3://``: ``GetObject`` with ``Range`` and ``If-Match: <ETag>`` (through s3fs's client); the
  response's ETag and ``Content-Range`` total are checked too. No extra request. The client's
  connection pool is sized to ``concurrency`` unless ``storage_options["config_kwargs"]`` sets
  ``max_pool_connections`` (botocore's default of 10 would serialise the rest).
- ``http(s)://``: ``GET`` with ``Range`` and ``If-Match`` (through the aiohttp session of fsspec's
  HTTPFileSystem); status, ``Content-Range``, ``ETag`` and the body length are checked. A server that
  ignores ``Range`` (status 200) is accepted when the full body has the expected size, and sliced.
- ``gs://``: a media ``GET`` with ``Range`` and ``ifGenerationMatch=<generation>`` (Google answers 412 for
  another generation); the answer's ``x-goog-generation`` and ``Content-Range`` are checked. No extra
  request, except against a server that does not report the generation (an emulator): then the object's
  metadata is checked as for "any other" below.
- ``az://`` / ``abfs://``: ``download_blob`` with ``If-Match: <ETag>`` (412 when the blob changed); the
  answer's ETag and ``Content-Range`` are checked. No extra request.
- any other fsspec file system (``file://``, ``memory://``, ...): ``_cat_file(start, end)`` (async
  backends) or ``cat_file`` in a thread pool (sync ones). The ETag and size are compared with one
  ``info`` per object and read call, sent at the same time as the range request.

Errors, all naming the URL:

- transient (HTTP 5xx, 408, 429, timeouts past ``timeout`` seconds, dropped connections, short
  bodies) are retried ``retries`` times with exponential backoff (``backoff * 2**attempt`` seconds,
  capped at ``max_backoff``, with a deterministic jitter in [0.5, 1] from the URL and attempt); when
  every attempt failed: :class:`~consumer.errors.RemoteError` (an ``OSError``), or
  :class:`~consumer.errors.FileChangedError` when the last failure was a short body;
- 403/401: :class:`~consumer.errors.InputError` (check credentials / ``storage_options``);
- 404: :class:`~consumer.errors.FileChangedError` when the object was indexed (an expected ETag or
  size was given), else :class:`~consumer.errors.InputError`;
- 412 (If-Match failed), another ETag or another size: :class:`~consumer.errors.FileChangedError`.

A range's bytes are copied into the output only after the whole response arrived with exactly the
requested length, so a partially read object is never served.

With ``cache_dir`` and ``cache_bytes`` the reader is read-through: blocks of ``block_bytes`` of objects
with a known ETag are kept in a :class:`~consumer.sources.block_cache.BlockCache` and later reads are local.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import FileChangedError, InputError, short_repr
from ..storage import parse_size
from .block_cache import BlockCache, block_key
from .request_plan import DEFAULT_COALESCE_BYTES, plan_requests
from .requests import _INHERITED, DEFAULT_BLOCK_BYTES, DEFAULT_CONCURRENCY, DEFAULT_MAX_REQUEST, RangeRequests, _Job
from .urls import normalise_etag, open_filesystem, url_protocol

__all__ = ["RemoteReader", "fetch_prefixes", "DEFAULT_CONCURRENCY", "DEFAULT_BLOCK_BYTES"]

class RemoteReader(RangeRequests):
    """Concurrent verified range reads from remote objects (see the module docstring).

    ``storage_options`` go to fsspec unchanged for every scheme; ``concurrency`` bounds requests in
    flight; ``retries`` is the number of retries after the first attempt; ``timeout`` (seconds) bounds each
    attempt; ranges of one object less than ``coalesce_bytes`` apart are fetched by one request (None: never;
    :mod:`consumer.sources.request_plan`); ``cache_dir`` + ``cache_bytes`` (int or a size string like ``"20GB"``)
    enable the read-through block cache. The reader is picklable (DataLoader workers): file systems are
    reopened per process.

    ``stats`` counts ``requests`` (attempts sent), ``retries``, ``bytes`` (received) and ``max_in_flight``.
    """

    def __init__(self, storage_options: Mapping[str, Any] | None = None, *, concurrency: int = DEFAULT_CONCURRENCY,
                 retries: int = 5, timeout: float = 60.0, backoff: float = 0.1, max_backoff: float = 5.0,
                 cache_dir: str | os.PathLike[str] | None = None, cache_bytes: int | str | None = None,
                 block_bytes: int = DEFAULT_BLOCK_BYTES, max_request_bytes: int = DEFAULT_MAX_REQUEST,
                 coalesce_bytes: int | None = DEFAULT_COALESCE_BYTES) -> None:
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise InputError(f"storage_options must be a dict or None, got {short_repr(storage_options)}")
        for name, value, low in (("concurrency", concurrency, 1), ("retries", retries, 0),
                                 ("block_bytes", block_bytes, 1), ("max_request_bytes", max_request_bytes, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise InputError(f"{name} must be an int >= {low}, got {short_repr(value)}")
        for name, secs in (("timeout", timeout), ("backoff", backoff), ("max_backoff", max_backoff)):
            if not isinstance(secs, (int, float)) or isinstance(secs, bool) or not 0 <= secs < float("inf"):
                raise InputError(f"{name} must be a finite number of seconds >= 0, got {short_repr(secs)}")
        if coalesce_bytes is not None and (not isinstance(coalesce_bytes, (int, np.integer))
                                           or isinstance(coalesce_bytes, bool) or coalesce_bytes < 0):
            raise InputError(f"coalesce_bytes must be an int >= 0 or None, got {short_repr(coalesce_bytes)}")
        if (cache_dir is None) != (cache_bytes is None):
            raise InputError(f"remote cache needs both cache_dir and cache_bytes, got cache_dir={short_repr(cache_dir)}"
                             f", cache_bytes={short_repr(cache_bytes)}")
        self.storage_options = dict(storage_options or {})
        self.concurrency = int(concurrency)
        self.retries = int(retries)
        self.timeout = float(timeout) if timeout else None
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.block_bytes = int(block_bytes)
        self.max_request_bytes = int(max_request_bytes)
        self.coalesce_bytes = None if coalesce_bytes is None else int(coalesce_bytes)
        self.cache_dir = None if cache_dir is None else os.path.expanduser(os.fspath(cache_dir))
        self.cache_bytes = None if cache_bytes is None else parse_size(cache_bytes, "remote_cache")
        self._reset()

    def _reset(self) -> None:
        _INHERITED.extend(getattr(self, "_fs", {}).values())  # see _keep_inherited_filesystems
        self._pid = os.getpid()
        self._fs: dict[str, Any] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._checked: dict[str, Any] = {}  # url -> task of its info, for the call under way
        self._in_flight = 0
        self.stats = {"requests": 0, "retries": 0, "bytes": 0, "max_in_flight": 0}
        self.cache = (BlockCache(self.cache_dir, self.cache_bytes)
                      if self.cache_dir is not None and self.cache_bytes else None)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable state: settings only (file systems, pools and counters are per process)."""
        keep = ("storage_options", "concurrency", "retries", "timeout", "backoff", "max_backoff", "block_bytes",
                "max_request_bytes", "coalesce_bytes", "cache_dir", "cache_bytes")
        return {k: self.__dict__[k] for k in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore settings and start with fresh per-process resources."""
        self.__dict__.update(state)
        self._reset()

    def close(self) -> None:
        """Shut down the thread pool used for synchronous file systems (file systems stay cached by fsspec)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> RemoteReader:
        """Use as a context manager; :meth:`close` on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the reader."""
        self.close()

    # ------------------------------------------------------------------ file systems
    def filesystem(self, url: str) -> Any:
        """The fsspec file system serving ``url`` (one per scheme and process)."""
        if os.getpid() != self._pid:  # forked (DataLoader worker): never reuse the parent's sessions
            self._reset()
        protocol = url_protocol(url)
        fs = self._fs.get(protocol)
        if fs is None:
            options = self.storage_options
            if protocol in ("s3", "s3a"):  # botocore pools 10 connections by default: room for every request
                config = dict(options.get("config_kwargs") or {})
                config.setdefault("max_pool_connections", self.concurrency)
                options = {**options, "config_kwargs": config}
            fs, _ = open_filesystem(url, options)
            self._fs[protocol] = fs
        return fs

    # ------------------------------------------------------------------ public reads
    def read_ranges(self, urls: Sequence[str], starts: np.ndarray | Sequence[int], lengths: np.ndarray | Sequence[int],
                    out: np.ndarray, out_offsets: np.ndarray | Sequence[int],
                    expected_etags: Sequence[str | None] | None = None,
                    expected_sizes: np.ndarray | Sequence[int] | None = None) -> None:
        """Fill ``out[out_offsets[i] : out_offsets[i] + lengths[i]]`` with bytes ``starts[i] ..
        starts[i] + lengths[i]`` of ``urls[i]``, every range of the call fetched concurrently.

        ``expected_etags[i]`` / ``expected_sizes[i]`` (from the index) are checked against the server; a
        mismatch raises :class:`FileChangedError` naming the URL. See the module docstring for retries
        and errors. Bytes are written only from complete, verified responses; when the call raises, other
        ranges of it (or other 8 MiB parts of a long range) may already be in ``out``: discard it.
        """
        n = len(urls)
        starts_a = self._int_array(starts, n, "starts")
        lengths_a = self._int_array(lengths, n, "lengths")
        offsets_a = self._int_array(out_offsets, n, "out_offsets")
        if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1 or not out.flags.writeable:
            raise InputError(f"out must be a writable 1-D numpy uint8 array, got {short_repr(out)}")
        if n and int((offsets_a + lengths_a).max()) > out.size:
            i = int(np.argmax(offsets_a + lengths_a))
            raise InputError(f"out_offsets[{i}] + lengths[{i}] = {int(offsets_a[i] + lengths_a[i])} is past the end "
                             f"of out (size {out.size})")
        etags = self._etags(expected_etags, n)
        sizes = None if expected_sizes is None else self._int_array(expected_sizes, n, "expected_sizes")
        if sizes is not None:
            bad = np.flatnonzero(starts_a + lengths_a > sizes)
            if bad.size:
                i = int(bad[0])
                raise InputError(f"range {int(starts_a[i])}+{int(lengths_a[i])} of {urls[i]!r} is past its expected "
                                 f"size {int(sizes[i])}")
        live = np.flatnonzero(lengths_a > 0)
        if not live.size:
            return
        if self.cache is not None:
            self._read_cached(self.cache, urls, starts_a, lengths_a, out, offsets_a, etags, sizes, live)
            return
        plan = plan_requests(urls, etags, starts_a, lengths_a, offsets_a, live, self.max_request_bytes,
                             self.coalesce_bytes)
        jobs = [_Job(urls[i], s, ln, etags[i], None if sizes is None else int(sizes[i])) for i, s, ln, _ in plan]

        def place(k: int, data: bytes) -> None:
            for rel, ln, o in plan[k][3]:
                out[o:o + ln] = np.frombuffer(data, dtype=np.uint8, count=ln, offset=rel)

        self._run(jobs, place)

    def read_prefixes(self, urls: Sequence[str], nbytes: int, sizes: np.ndarray | Sequence[int] | None = None,
                      etags: Sequence[str | None] | None = None) -> list[bytes]:
        """The first ``min(nbytes, size)`` bytes of each object, fetched concurrently. Sizes not given are
        looked up (one ``info`` per object, concurrently)."""
        if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes < 1:
            raise InputError(f"nbytes must be an int >= 1, got {short_repr(nbytes)}")
        sizes_a = (self._int_array(sizes, len(urls), "sizes") if sizes is not None
                   else np.asarray([s for _, s in self.stat(urls)], dtype=np.int64))
        lengths = np.minimum(sizes_a, int(nbytes))
        offsets = np.zeros(len(urls) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        buf = np.empty(int(offsets[-1]), dtype=np.uint8)
        self.read_ranges(urls, np.zeros(len(urls), dtype=np.int64), lengths, buf, offsets[:-1],
                         expected_etags=etags, expected_sizes=sizes_a)
        return [buf[offsets[i]:offsets[i + 1]].tobytes() for i in range(len(urls))]

    def stat(self, urls: Sequence[str]) -> list[tuple[str | None, int]]:
        """``(etag, size)`` of each object from one ``info`` (HEAD) each, concurrently, with retries."""
        results: list[tuple[str | None, int]] = [(None, 0)] * len(urls)

        def make(k: int, url: str) -> Callable[[asyncio.Semaphore], Awaitable[None]]:
            async def go(sem: asyncio.Semaphore) -> None:
                results[k] = await self._with_retries(_Job(url, 0, 0, None, None), sem, self._info)
            return go

        self._run_coros([make(k, u) for k, u in enumerate(urls)], urls)
        return results

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _int_array(values: object, n: int, name: str) -> np.ndarray:
        arr = np.asarray(values)
        if arr.shape != (n,) or (n and arr.dtype.kind not in "iu"):
            raise InputError(f"{name} must be {n} integers (one per url), got {short_repr(values)}")
        arr = arr.astype(np.int64, copy=False)
        if n and int(arr.min()) < 0:
            raise InputError(f"{name} must be >= 0, got {int(arr.min())} at index {int(np.argmin(arr))}")
        return arr

    @staticmethod
    def _etags(expected: Sequence[str | None] | None, n: int) -> list[str | None]:
        if expected is None:
            return [None] * n
        if len(expected) != n:
            raise InputError(f"expected_etags must hold {n} values (one per url), got {len(expected)}")
        return [normalise_etag(e) for e in expected]

    def _split(self, start: int, length: int, offset: int) -> list[tuple[int, int, int]]:
        step = self.max_request_bytes
        return [(start + d, min(step, length - d), offset + d) for d in range(0, length, step)]

    def _read_cached(self, cache: BlockCache, urls: Sequence[str], starts: np.ndarray, lengths: np.ndarray,
                     out: np.ndarray, offsets: np.ndarray, etags: Sequence[str | None], sizes: np.ndarray | None,
                     live: np.ndarray) -> None:
        block = self.block_bytes
        need_size = [int(i) for i in live if etags[i] is not None and sizes is None]
        known_sizes: dict[int, int] = {}
        if need_size:
            for i, (etag, size) in zip(need_size, self.stat([urls[i] for i in need_size])):
                if etag is not None and etag != etags[i]:
                    raise FileChangedError(f"{urls[i]!r} changed since it was indexed: ETag {etags[i]!r}, now {etag!r}")
                known_sizes[i] = size
        blocks: dict[str, tuple[int, int, int]] = {}  # key -> (range index, block start, block length)
        plan: list[tuple[int, list[str]]] = []
        direct_jobs, direct_places = [], []
        for i in live.tolist():
            if etags[i] is None or etags[i].startswith("W/"):  # nothing would tell a stale copy: read through
                osize = None if sizes is None else int(sizes[i])
                for s, ln, o in self._split(int(starts[i]), int(lengths[i]), int(offsets[i])):
                    direct_jobs.append(_Job(urls[i], s, ln, etags[i], osize))
                    direct_places.append(o)
                continue
            size = int(sizes[i]) if sizes is not None else known_sizes[i]
            first, last = int(starts[i]) // block, (int(starts[i] + lengths[i]) - 1) // block
            keys = []
            for k in range(first, last + 1):
                key = block_key(urls[i], etags[i], size, block, k)
                keys.append(key)
                if key not in blocks:
                    blocks[key] = (i, k * block, min(block, size - k * block))
            plan.append((i, keys))
        data: dict[str, bytes] = {}
        missing = []
        for key, (_i, _bstart, blen) in blocks.items():
            got = cache.get(key, blen)
            if got is None:
                missing.append(key)
            else:
                data[key] = got
        jobs = [_Job(urls[blocks[k][0]], blocks[k][1], blocks[k][2], etags[blocks[k][0]],
                     int(sizes[blocks[k][0]]) if sizes is not None else known_sizes[blocks[k][0]]) for k in missing]
        fetched: dict[int, bytes] = {}

        def keep(k: int, payload: bytes) -> None:
            fetched[k] = payload

        def place(k: int, payload: bytes) -> None:
            out[direct_places[k]:direct_places[k] + len(payload)] = np.frombuffer(payload, dtype=np.uint8)

        all_jobs = jobs + direct_jobs
        n_cached = len(jobs)
        self._run(all_jobs, lambda k, p: keep(k, p) if k < n_cached else place(k - n_cached, p))
        for k, key in enumerate(missing):
            data[key] = fetched[k]
            cache.put(key, fetched[k])
        for i, keys in plan:
            pos, end, o = int(starts[i]), int(starts[i] + lengths[i]), int(offsets[i])
            for key in keys:
                bstart = blocks[key][1]
                payload = data[key]
                a, b = pos - bstart, min(end, bstart + len(payload)) - bstart
                out[o:o + (b - a)] = np.frombuffer(payload, dtype=np.uint8, count=b - a, offset=a)
                o += b - a
                pos += b - a

    def _run(self, jobs: list[_Job], place: Callable[[int, bytes], None]) -> None:
        """Fetch every job concurrently, calling ``place(k, bytes)`` for each completed job."""
        if not jobs:
            return

        def make(k: int, job: _Job) -> Callable[[asyncio.Semaphore], Awaitable[None]]:
            async def go(sem: asyncio.Semaphore) -> None:
                place(k, await self._with_retries(job, sem, self._get))
            return go

        self._run_coros([make(k, j) for k, j in enumerate(jobs)], [j.url for j in jobs])

    def _run_coros(self, coro_fns: list[Callable[[asyncio.Semaphore], Awaitable[None]]],
                   urls: Sequence[str]) -> None:
        if not coro_fns:
            return
        from fsspec.asyn import get_loop, sync  # noqa: PLC0415  (fsspec is present: a filesystem was opened)

        for u in dict.fromkeys(urls):  # open file systems in the caller's thread, before the loop runs
            self.filesystem(u)
        self._checked = {}  # metadata checks are per call: a later call sees the object as it is then
        loop = get_loop()

        async def main() -> None:
            sem = asyncio.Semaphore(self.concurrency)
            tasks = [asyncio.ensure_future(fn(sem)) for fn in coro_fns]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

        sync(loop, main)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(self.concurrency, 32), thread_name_prefix="consumer-remote")
        return self._pool


def fetch_prefixes(urls: Sequence[str], nbytes: int, storage_options: Mapping[str, Any] | None = None, *,
                   sizes: np.ndarray | Sequence[int] | None = None, etags: Sequence[str | None] | None = None,
                   reader: RemoteReader | None = None) -> list[bytes]:
    """The first ``min(nbytes, size)`` bytes of every object, fetched with concurrent range requests.

    Pass ``sizes`` (and ``etags``) from a :class:`~consumer.sources.urls.Listing` to avoid one ``info`` per object.
    """
    own = reader is None
    reader = reader or RemoteReader(storage_options)
    try:
        return reader.read_prefixes(urls, nbytes, sizes=sizes, etags=etags)
    finally:
        if own:
            reader.close()
