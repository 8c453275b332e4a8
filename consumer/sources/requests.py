"""Range requests to remote objects, one protocol each, with retries: the request half of
:class:`~consumer.sources.range_reader.RemoteReader` (see its module docstring for what each backend checks).

:class:`RangeRequests` is a mixin: it issues one range request for a :class:`_Job` (``s3://`` with
``If-Match``, ``http(s)://`` with ``If-Match``, ``gs://`` with ``ifGenerationMatch`` and ``az://`` with
``If-Match`` (:mod:`consumer.sources.cloud`), any other fsspec file system with one ``info`` per object and call),
verifies the answer (length, ETag, ``Content-Range``) and retries transient failures with backoff;
the reader provides ``filesystem(url)``, ``timeout``, ``retries``, ``backoff``, ``max_backoff`` and
``_executor()``."""

from __future__ import annotations

import asyncio
import errno
import functools
import gc
import hashlib
import os
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import FileChangedError, InputError, RemoteError
from .cloud import get_azure, get_gcs
from .urls import etag_of, normalise_etag, url_protocol

__all__ = ["RangeRequests", "DEFAULT_CONCURRENCY", "DEFAULT_BLOCK_BYTES", "DEFAULT_MAX_REQUEST"]


DEFAULT_CONCURRENCY = 64
DEFAULT_BLOCK_BYTES = 4 << 20
DEFAULT_MAX_REQUEST = 8 << 20

# transient failures by class name, so neither aiohttp nor botocore has to be importable here
_TRANSIENT_NAMES = frozenset({
    "ClientPayloadError", "ClientConnectionError", "ServerDisconnectedError", "ClientOSError",
    "ServerTimeoutError", "ClientConnectorError", "ContentLengthError", "TransferEncodingError",
    "HTTPClientError", "ConnectionClosedError", "EndpointConnectionError", "ReadTimeoutError",
    "ConnectTimeoutError", "IncompleteReadError", "ResponseStreamingError", "IncompleteRead", "FSTimeoutError",
    "ProtocolError", "RemoteDisconnected", "ServiceRequestError", "ServiceResponseError",
})
_TRANSIENT_ERRNO = frozenset({errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EPIPE})


# Fork safety. A forked child (a DataLoader worker) inherits the parent's fsspec file systems, whose
# sockets are registered in the parent's event loop; epoll instances are shared across fork. If the child
# garbage-collects those objects (or the parent's not yet collected garbage holding sockets), their
# finalizers close the sockets and unregister them from the *shared* epoll, and the parent's next requests
# on pooled connections hang until the timeout (seen in the tests: the parent's requests timed out after a
# child had used s3fs). So a child of a process that used remote I/O keeps every inherited file system
# alive and freezes the inherited objects out of its cyclic garbage collector (``gc.freeze``: they are
# never finalized in the child); the child opens its own file systems.
_INHERITED: list[Any] = []


def _keep_inherited_filesystems() -> None:
    fsspec_spec = sys.modules.get("fsspec.spec")
    if fsspec_spec is None:
        return
    if "aiohttp" in sys.modules:  # sockets of an event loop may exist: never finalize inherited objects
        gc.freeze()
    stack = [fsspec_spec.AbstractFileSystem]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        cache = cls.__dict__.get("_cache")
        if cache:
            _INHERITED.extend(cache.values())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_keep_inherited_filesystems)


class _Short(Exception):
    """The body was shorter or longer than the range asked for (transient until the last attempt)."""

    def __init__(self, got: int, wanted: int) -> None:
        super().__init__(f"got {got} bytes, expected {wanted}")
        self.got, self.wanted = got, wanted


class _Changed(Exception):
    """The server answered for another version of the object (ETag, size) or refused If-Match (412)."""


@dataclass
class _Job:
    """One range request: bytes ``start .. start+length`` of ``url``."""

    url: str
    start: int
    length: int
    etag: str | None
    size: int | None


def _status(exc: BaseException) -> int | None:
    """The HTTP status carried by an exception or its causes (aiohttp, botocore), if any."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 8:
        # aiohttp, azure-core, gcsfs (aiohttp's parser errors carry a ``code`` too, of the parse: not an answer)
        for attr in ("status", "status_code") + (("code",) if type(e).__name__ == "HttpError" else ()):
            status = getattr(e, attr, None)
            if isinstance(status, int) and not isinstance(status, bool) and 100 <= status < 600:
                return status
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def _classify(exc: BaseException) -> str:
    """One of ``short``, ``changed``, ``missing``, ``denied``, ``range``, ``transient``, ``fatal``."""
    if isinstance(exc, _Short):
        return "short"
    if isinstance(exc, _Changed):
        return "changed"
    status = _status(exc)
    if status is not None:
        if status == 404:
            return "missing"
        if status in (401, 403):
            return "denied"
        if status == 412:
            return "changed"
        if status == 416:
            return "range"
        if status in (408, 429) or status >= 500:
            return "transient"
        return "fatal"
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "denied"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return "transient"
    e: BaseException | None = exc
    for _ in range(8):
        if e is None:
            break
        if any(c.__name__ in _TRANSIENT_NAMES for c in type(e).__mro__):
            return "transient"
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNO:
            return "transient"
        e = e.__cause__ or e.__context__
    return "fatal"


def _jitter(url: str, start: int, attempt: int) -> float:
    digest = hashlib.sha256(f"{url}\n{start}\n{attempt}".encode("utf-8", "surrogateescape")).digest()
    return 0.5 + 0.5 * int.from_bytes(digest[:4], "big") / 2**32


def _content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``(first, last, total)`` of a ``Content-Range: bytes a-b/total`` header (total None for ``*``)."""
    if not value or not value.startswith("bytes "):
        return None
    try:
        span, _, total = value[6:].partition("/")
        first, _, last = span.partition("-")
        return int(first), int(last), (None if total.strip() == "*" else int(total))
    except ValueError:
        return None


class RangeRequests:
    """One verified, retried range request per :class:`_Job` (mixed into the reader)."""

    # provided by the reader (RemoteReader sets them in __init__ / _reset)
    timeout: float | None
    retries: int
    backoff: float
    max_backoff: float
    stats: dict[str, int]
    _in_flight: int
    _fs: dict[str, Any]
    _checked: dict[Any, Any]

    def filesystem(self, url: str) -> Any:  # pragma: no cover - the reader's
        raise NotImplementedError

    def _executor(self) -> ThreadPoolExecutor:  # pragma: no cover - the reader's
        raise NotImplementedError

    async def _with_retries(self, job: _Job, sem: asyncio.Semaphore,
                                request: Callable[[_Job], Awaitable[Any]]) -> Any:
        """``await request(job)`` under the semaphore and the timeout, retried on transient errors; a
        ``bytes`` result must be exactly ``job.length`` long."""
        attempt = 0
        while True:
            try:
                async with sem:
                    self._in_flight += 1
                    self.stats["requests"] += 1
                    self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self._in_flight)
                    try:
                        if self.timeout:
                            result = await asyncio.wait_for(request(job), self.timeout)
                        else:
                            result = await request(job)
                    finally:
                        self._in_flight -= 1
                if isinstance(result, bytes):
                    if len(result) != job.length:
                        raise _Short(len(result), job.length)
                    self.stats["bytes"] += len(result)
                return result
            except Exception as e:  # noqa: BLE001  (classified below: each kind becomes its documented error)
                kind = _classify(e)
                if kind in ("transient", "short") and attempt < self.retries:
                    delay = min(self.max_backoff, self.backoff * 2 ** attempt) * _jitter(job.url, job.start, attempt)
                    attempt += 1
                    self.stats["retries"] += 1
                    await asyncio.sleep(delay)
                    continue
                raise self._error(kind, e, job, attempt) from e

    def _error(self, kind: str, exc: BaseException, job: _Job, attempt: int) -> BaseException:
        url, what = job.url, f"bytes {job.start}..{job.start + job.length}"
        indexed = job.etag is not None or job.size is not None
        if kind == "short":
            return FileChangedError(f"{url!r}: {what}: short or partial body after {attempt + 1} attempts ({exc}); "
                                    "the object changed or the connection kept dropping; nothing was served")
        if kind == "changed":
            return FileChangedError(f"{url!r} changed since it was indexed (expected ETag {job.etag!r}, size "
                                    f"{job.size}): {(str(exc).splitlines() or [''])[0]}")
        if kind == "missing":
            if indexed:
                return FileChangedError(f"{url!r} no longer exists (404); it was indexed with ETag {job.etag!r}")
            return InputError(f"url {url!r} not found (404)")
        if kind == "denied":
            return InputError(f"url {url!r}: access denied (403); check credentials / storage_options: {exc}")
        if kind == "range":
            if indexed:
                return FileChangedError(f"{url!r}: {what} is past the end of the object (416): it shrank since "
                                        "it was indexed")
            return InputError(f"url {url!r}: {what} is past the end of the object (416)")
        if kind == "transient":
            return RemoteError(f"{url!r}: {what} failed after {attempt + 1} attempts "
                               f"({type(exc).__name__}: {exc or 'timeout'})")
        return RemoteError(f"{url!r}: {what} failed: {type(exc).__name__}: {exc}")

    async def _get(self, job: _Job) -> bytes:
        fs = self._fs[url_protocol(job.url)]
        protocol = url_protocol(job.url)
        if protocol in ("s3", "s3a") and hasattr(fs, "_call_s3"):
            return await self._get_s3(fs, job)
        if protocol in ("http", "https") and hasattr(fs, "set_session"):
            return await self._get_http(fs, job)
        if protocol in ("gs", "gcs") and hasattr(fs, "_get_headers"):
            return await self._get_gcs(fs, job)
        if protocol in ("az", "abfs", "abfss") and hasattr(fs, "service_client"):
            data, etag, crange = await get_azure(fs, job.url, job.start, job.length,
                                                 None if job.etag is None or job.etag.startswith("W/") else job.etag)
            self._check(job, normalise_etag(etag), self._range_at(job, crange))
            return data
        return await self._get_generic(fs, job)

    @staticmethod
    def _range_at(job: _Job, text: str | None) -> tuple[int, int, int | None] | None:
        """The parsed ``Content-Range`` of an answer, which must start where the request did."""
        crange = _content_range(text)
        if crange is not None and crange[0] != job.start:
            raise _Changed(f"server answered Content-Range {crange} for a range starting at {job.start}")
        return crange

    async def _get_gcs(self, fs: Any, job: _Job) -> bytes:
        data, generation, crange = await get_gcs(fs, job.url, job.start, job.length, job.etag)
        parsed = self._range_at(job, crange)
        if generation is None:  # the server did not say which generation answered (an emulator): ask
            await self._check_metadata(job)
        self._check(job, generation, parsed)
        return data

    async def _get_s3(self, fs: Any, job: _Job) -> bytes:
        bucket, key, version = fs.split_path(job.url)
        kw: dict[str, Any] = {"Range": f"bytes={job.start}-{job.start + job.length - 1}"}
        if job.etag and not job.etag.startswith("W/"):
            kw["IfMatch"] = f'"{job.etag}"'
        if version:
            kw["VersionId"] = version
        resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, **kw)
        try:
            data: bytes = await resp["Body"].read()
        finally:
            resp["Body"].close()
        self._check(job, normalise_etag(resp.get("ETag")), _content_range(resp.get("ContentRange")))
        return data

    async def _get_http(self, fs: Any, job: _Job) -> bytes:
        session = await fs.set_session()
        kw = dict(fs.kwargs)
        headers = dict(kw.pop("headers", None) or {})
        headers["Range"] = f"bytes={job.start}-{job.start + job.length - 1}"
        headers["Accept-Encoding"] = "identity"
        if job.etag and not job.etag.startswith("W/"):
            headers["If-Match"] = f'"{job.etag}"'
        async with session.get(fs.encode_url(job.url), headers=headers, **kw) as r:
            if r.status >= 400:
                r.raise_for_status()
            data: bytes = await r.read()
            etag = normalise_etag(r.headers.get("ETag"))
            crange = _content_range(r.headers.get("Content-Range"))
            status = r.status
        if status == 206:
            if crange is None or crange[0] != job.start:
                raise _Changed(f"server answered Content-Range {crange} for a range starting at {job.start}")
            self._check(job, etag, crange)
            return data
        if status == 200:  # Range ignored: the whole object came back
            if job.size is not None and len(data) != job.size:
                raise _Short(len(data), job.size)
            self._check(job, etag, None)
            return data[job.start:job.start + job.length]
        raise RemoteError(f"{job.url!r}: unexpected HTTP status {status} for a range request")

    def _check(self, job: _Job, etag: str | None, crange: tuple[int, int, int | None] | None) -> None:
        if job.etag is not None and etag is not None and etag != job.etag:
            raise _Changed(f"ETag is now {etag!r}")
        if job.size is not None and crange is not None and crange[2] is not None and crange[2] != job.size:
            raise _Changed(f"size is now {crange[2]}")

    async def _info(self, job: _Job) -> tuple[str | None, int]:
        fs = self._fs[url_protocol(job.url)]
        fs.invalidate_cache(fs._strip_protocol(job.url))  # the object as it is now, not a cached listing
        if getattr(fs, "async_impl", False):
            info = await fs._info(job.url)
        else:
            loop = asyncio.get_running_loop()
            info = await loop.run_in_executor(self._executor(), fs.info, job.url)
        size = info.get("size")
        if size is None:
            raise InputError(f"url {job.url!r}: the server reports no size")
        return etag_of(info), int(size)

    async def _check_metadata(self, job: _Job) -> None:
        """Compare the object's ETag and size, from one ``info`` per object and call (shared by the call's
        ranges of that object), with the indexed ones."""
        if job.etag is None and job.size is None:
            return
        task = self._checked.get(job.url)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._checked[job.url] = asyncio.ensure_future(self._info(job))
        etag, size = await asyncio.shield(task)
        if job.etag is not None and etag is not None and etag != job.etag:
            raise _Changed(f"ETag is now {etag!r}")
        if job.size is not None and size != job.size:
            raise _Changed(f"size is now {size}")

    async def _get_generic(self, fs: Any, job: _Job) -> bytes:
        if getattr(fs, "async_impl", False):
            body = fs._cat_file(job.url, start=job.start, end=job.start + job.length)
        else:
            body = asyncio.get_running_loop().run_in_executor(
                self._executor(), functools.partial(fs.cat_file, job.url, start=job.start, end=job.start + job.length))
        data, _ = await asyncio.gather(body, self._check_metadata(job))  # both requests in flight at once
        return bytes(data)
