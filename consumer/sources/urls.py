"""Remote sources: URLs, fsspec file systems, one-pass listings of object-storage prefixes.

This module is the only place that turns a URL into a file system (``fsspec``, the Python
ecosystem's file-system layer) and lists a bucket. Reading bytes is :mod:`consumer.sources.range_reader`;
the on-disk read-through cache is :mod:`consumer.sources.block_cache`.

- :func:`is_url` tells a URL from a local path; :func:`expand_local` expands ``~`` in local paths and
  :func:`local_path_of` turns ``file://`` URLs into plain paths so the fast local reader serves them.
- :func:`open_filesystem` returns ``(fs, root)`` for a URL; a missing optional dependency raises
  :class:`~consumer.errors.MissingDependencyError` naming the extra (``pip install 'consumer[s3]'``).
  Credentials and endpoints: each backend's usual places plus ``storage_options`` handed to fsspec as is.
- :func:`list_objects` lists every object below a prefix (or the one object a URL names) with **one
  paginated listing** (S3, GCS, Azure: ``fs.find(detail=True)``, no per-object ``HEAD``) into a
  :class:`Listing` (URLs sorted, sizes, ETags — for GCS the generation —, modification times). HTTP
  directory pages carry no sizes: for ``http(s)://`` they come from one concurrent ``HEAD`` per object.
- :func:`stat_objects`: the same facts for an explicit list of URLs, listing each parent prefix once.
- :func:`class_layout` applies the local directory rule to a listing: the immediate sub-prefixes of the
  root are classes; a prefix without sub-prefixes is one class ``"null"``; loose objects next to class
  prefixes are an error; hidden names and zero-byte "directory marker" keys are skipped.
- :func:`shard_of` assigns each URL to one of ``n`` shards by a hash of the URL (stable under additions).
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeGuard, TypeVar

import numpy as np

from ..errors import InputError, MissingDependencyError, short_repr
from .cloud import gcs_class

__all__ = ["EXTRAS", "Listing", "is_url", "expand_local", "local_path_of", "url_protocol", "open_filesystem",
           "list_objects", "stat_objects", "class_layout", "shard_of", "DEFAULT_CLASS",
           "normalise_etag", "etag_of", "mtime_ns_of"]

DEFAULT_CLASS = "null"
_URL = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")

# protocol -> (extra of consumer, the package that implements it)
EXTRAS: dict[str, tuple[str, str]] = {
    "s3": ("s3", "s3fs"), "s3a": ("s3", "s3fs"),
    "gs": ("gcs", "gcsfs"), "gcs": ("gcs", "gcsfs"),
    "az": ("azure", "adlfs"), "abfs": ("azure", "adlfs"), "abfss": ("azure", "adlfs"),
    "http": ("http", "aiohttp"), "https": ("http", "aiohttp"),
}

_ETAG_KEYS = ("ETag", "etag", "Etag")
_P = TypeVar("_P")  # whatever a user handed in as a path

_MTIME_KEYS = ("LastModified", "last_modified", "Last-Modified", "mtime", "updated", "modified", "timeCreated",
               "created")


def is_url(path: object) -> TypeGuard[str]:
    """True if ``path`` is a string of the form ``scheme://...`` (``s3://``, ``https://``, ``file://``, ...)."""
    return isinstance(path, str) and _URL.match(path) is not None


def url_protocol(url: str) -> str:
    """The lower-case scheme of a URL (``"s3"`` for ``"s3://bucket/key"``); ``"file"`` for a local path."""
    m = _URL.match(url) if isinstance(url, str) else None
    return m.group(1).lower() if m else "file"


def expand_local(path: _P) -> _P | str:
    """``~`` and ``~user`` expanded in a local path (``str`` or ``os.PathLike``); URLs and other values are
    returned unchanged, so this can be applied to every path a user hands in."""
    if is_url(path):
        return path
    if isinstance(path, os.PathLike):
        s = os.fspath(path)
        return os.path.expanduser(s) if isinstance(s, str) and s.startswith("~") else path
    if isinstance(path, str) and path.startswith("~"):
        return os.path.expanduser(path)
    return path


def local_path_of(url: str) -> str | None:
    """The local path of a ``file://`` URL (``file:///data/x`` -> ``/data/x``, percent-escapes decoded), or
    None for any other URL; a plain path is returned expanded."""
    if not is_url(url):
        return expand_local(url)
    if url_protocol(url) != "file":
        return None
    from urllib.parse import unquote, urlparse  # noqa: PLC0415

    parts = urlparse(url)
    if parts.netloc not in ("", "localhost"):
        raise InputError(f"path: file:// URLs must name a local file (file:///abs/path), got {url!r}")
    return unquote(parts.path)


def _missing(protocol: str, package: str, error: BaseException) -> MissingDependencyError:
    extra, impl = EXTRAS.get(protocol, ("remote", package))
    return MissingDependencyError(
        f"reading {protocol}:// URLs needs {package}{'' if package == impl else ' and ' + impl} "
        f"(pip install 'consumer[{extra}]'): {error}")


def _import_fsspec(protocol: str) -> ModuleType:
    try:
        import fsspec  # noqa: PLC0415  (optional dependency: imported only when a URL is used)
    except ImportError as e:
        raise _missing(protocol, "fsspec", e) from e
    module: ModuleType = fsspec
    return module


def open_filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(fs, root)`` for ``url``: the fsspec file system of its scheme, built with ``storage_options``
    (credentials, ``endpoint_url``, ``anon``, ... exactly as the backend takes them), and the URL's path
    in that file system's own form (``"bucket/prefix"`` for S3).

    Raises :class:`MissingDependencyError` naming the extra (``pip install 'consumer[s3]'``) when fsspec
    or the backend package is missing, :class:`InputError` for an unknown scheme or bad options.
    """
    if not is_url(url):
        raise InputError(f"url: expected a URL such as 's3://bucket/prefix', got {short_repr(url)}")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise InputError(f"storage_options must be a dict of fsspec options or None, got {short_repr(storage_options)}")
    protocol = url_protocol(url)
    fsspec = _import_fsspec(protocol)
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError as e:
        raise _missing(protocol, EXTRAS.get(protocol, ("remote", protocol))[1], e) from e
    except ValueError as e:
        raise InputError(f"url: unknown scheme {protocol!r} in {url!r}: {e}") from e
    cls = gcs_class(cls, storage_options or {}) if protocol in ("gs", "gcs") else cls
    try:
        fs = cls(**dict(storage_options or {}))
    except ImportError as e:
        raise _missing(protocol, EXTRAS.get(protocol, ("remote", protocol))[1], e) from e
    except TypeError as e:
        raise InputError(f"storage_options: {short_repr(dict(storage_options or {}))} not accepted by "
                         f"{cls.__name__} for {url!r}: {e}") from e
    return fs, fs._strip_protocol(url)


def _as_url(fs: Any, name: str, protocol: str) -> str:
    """A file system's path as a URL of the scheme the user wrote (``az://``, not adlfs's ``abfs://``)."""
    url = name if is_url(name) else fs.unstrip_protocol(name)
    return protocol + url[len(url_protocol(url)):]


@dataclass(frozen=True)
class Listing:
    """Every object below a prefix: ``urls`` sorted, with per-object ``sizes`` (int64), ``etags`` (str, or
    None when the backend reports none) and ``mtimes_ns`` (int64 nanoseconds since the epoch, 0 when
    unknown). ``root`` is the listed prefix as a URL ending in ``/``."""

    root: str
    urls: list[str]
    sizes: np.ndarray
    etags: list[str | None]
    mtimes_ns: np.ndarray

    def __len__(self) -> int:
        """Number of objects."""
        return len(self.urls)

    def select(self, mask: np.ndarray) -> Listing:
        """The objects where the boolean ``mask`` is true, in the same order."""
        idx = np.flatnonzero(np.asarray(mask, dtype=bool))
        return Listing(self.root, [self.urls[i] for i in idx], self.sizes[idx], [self.etags[i] for i in idx],
                       self.mtimes_ns[idx])


def normalise_etag(value: object) -> str | None:
    """An ETag without its quotes (``'"abc"'`` -> ``'abc'``); weak ETags keep their ``W/`` mark. None stays None."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    weak = text.startswith("W/")
    if weak:
        text = text[2:]
    text = text.strip('"')
    return ("W/" + text) if weak else text


def mtime_ns_of(info: Mapping[str, Any]) -> int:
    """Modification time (ns since the epoch) from an fsspec ``info`` dict of any backend; 0 when unknown."""
    for key in _MTIME_KEYS:
        value = info.get(key)
        if value is None or value == "":
            continue
        try:
            if isinstance(value, _dt.datetime):
                if value.tzinfo is None:
                    value = value.replace(tzinfo=_dt.timezone.utc)
                return int(round(value.timestamp() * 1e6)) * 1000
            if isinstance(value, (int, float)):
                return int(round(float(value) * 1e9))
            text = str(value)
            try:
                parsed = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(text)  # HTTP date (Last-Modified)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=_dt.timezone.utc)
            return int(round(parsed.timestamp() * 1e6)) * 1000
        except (TypeError, ValueError, OverflowError):
            continue
    return 0


def etag_of(info: Mapping[str, Any]) -> str | None:
    """The normalised ETag from an fsspec ``info`` dict of any backend, None when it reports none; for a GCS
    object its ``generation`` (changed exactly by new content; GCS's ETag also changes with metadata)."""
    if str(info.get("generation", "")).isdigit():
        return str(info["generation"])
    for key in _ETAG_KEYS:
        if info.get(key):
            return normalise_etag(info[key])
    return None


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in rel.split("/") if part)


def list_objects(url: str, storage_options: Mapping[str, Any] | None = None) -> Listing:
    """Every object below the prefix ``url`` in one paginated listing (see the module docstring).

    Hidden objects (a path component starting with ``.``) and directory markers are skipped. An empty or
    missing prefix raises :class:`InputError` naming the URL; a denied listing raises :class:`InputError`
    telling to check credentials / ``storage_options``.
    """
    fs, root = open_filesystem(url, storage_options)
    root = root.rstrip("/")
    fs.invalidate_cache(root)  # a listing must see the bucket as it is now, not fsspec's cached pages
    try:
        found = fs.find(root, detail=True, withdirs=False)
    except FileNotFoundError as e:
        raise InputError(f"url: no objects below {url!r} (not found: {e})") from e
    except PermissionError as e:
        raise InputError(f"url: listing {url!r} was denied (check credentials / storage_options): {e}") from e
    found = found if isinstance(found, dict) else {i["name"]: i for i in map(fs.info, found)}  # adlfs: one blob
    names, infos = [], []
    for name, info in found.items():
        if info.get("type", "file") != "file" or name.endswith("/"):
            continue
        rel = name[len(root):].lstrip("/") if name.startswith(root) else name
        if not rel and name.rstrip("/") == root:  # the URL names one object: a listing of that object
            rel = name.rsplit("/", 1)[-1]
        if not rel or _hidden(rel):
            continue
        names.append(name)
        infos.append(info)
    if not names:
        raise InputError(f"url: no objects below {url!r}")
    missing = [i for i, info in enumerate(infos) if info.get("size") is None]
    if missing:  # HTTP directory pages carry no sizes: one concurrent HEAD per such object
        extra = _info_many(fs, [names[i] for i in missing])
        for i, info in zip(missing, extra):
            infos[i] = {**infos[i], **info}
    order = sorted(range(len(names)), key=lambda i: names[i])
    protocol = url_protocol(url)
    urls = [_as_url(fs, names[i], protocol) for i in order]
    sizes = np.fromiter((int(infos[i]["size"]) for i in order), dtype=np.int64, count=len(order))
    etags = [etag_of(infos[i]) for i in order]
    mtimes = np.fromiter((mtime_ns_of(infos[i]) for i in order), dtype=np.int64, count=len(order))
    if len(names) == 1 and names[0].rstrip("/") == root:
        root = root.rsplit("/", 1)[0]
    return Listing(root=_as_url(fs, root, protocol) + "/", urls=urls, sizes=sizes, etags=etags, mtimes_ns=mtimes)


def stat_objects(urls: Sequence[str], storage_options: Mapping[str, Any] | None = None, *,
                 max_listings: int = 64) -> Listing:
    """Size, ETag and mtime of each URL of an explicit list (the F0–F3 forms), **in the order given**.

    The URLs' parent prefixes are listed, one level each (``fs.ls``: paginated, no per-object request),
    when there are at most ``max_listings`` distinct parents; otherwise, and for backends whose listings
    carry no sizes (HTTP), each object gets one ``info`` (HEAD), concurrently. A URL that names no object
    raises :class:`InputError` naming it (and up to four more).
    """
    if not urls:
        return Listing("", [], np.zeros(0, np.int64), [], np.zeros(0, np.int64))
    bad = [u for u in urls if not is_url(u)]
    if bad:
        raise InputError(f"urls: expected URLs, got {short_repr(bad[:5])}")
    protocols = {url_protocol(u) for u in urls}
    if len(protocols) != 1:
        raise InputError(f"urls: one scheme per call, got {sorted(protocols)}")
    fs, _ = open_filesystem(urls[0], storage_options)
    names = [fs._strip_protocol(u) for u in urls]
    parents = sorted({n.rsplit("/", 1)[0] for n in names})
    infos: dict[str, dict[str, Any]] = {}
    if len(parents) <= max_listings:
        for parent in parents:
            fs.invalidate_cache(parent)
            try:
                entries = fs.ls(parent, detail=True)
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.get("type", "file") == "file" and entry.get("size") is not None:
                    infos[entry["name"].rstrip("/")] = entry
    todo = sorted({n for n in names if n not in infos})
    if todo:
        try:
            extra = _info_many(fs, todo)
        except (FileNotFoundError, InputError):
            extra = None
        if extra is None:  # find which ones are missing, one by one
            extra = []
            for n in todo:
                try:
                    extra.append(fs.info(n))
                except FileNotFoundError:
                    extra.append({})
        infos.update({n: i for n, i in zip(todo, extra) if i.get("type", "file") == "file" and "size" in i})
    missing = [u for u, n in zip(urls, names) if n not in infos or infos[n].get("size") is None]
    if missing:
        raise InputError(f"fps: {len(missing)} URL(s) name no object: {short_repr(missing[:5], 400)}")
    got = [infos[n] for n in names]
    return Listing(root="", urls=list(urls),
                   sizes=np.fromiter((int(i["size"]) for i in got), dtype=np.int64, count=len(got)),
                   etags=[etag_of(i) for i in got],
                   mtimes_ns=np.fromiter((mtime_ns_of(i) for i in got), dtype=np.int64, count=len(got)))


def _info_many(fs: Any, names: Sequence[str], concurrency: int = 32) -> list[dict[str, Any]]:
    """``fs.info`` of many objects, concurrently on an async file system."""
    if not getattr(fs, "async_impl", False):
        return [fs.info(n) for n in names]
    import asyncio  # noqa: PLC0415

    from fsspec.asyn import sync  # noqa: PLC0415

    async def run() -> list[dict[str, Any]]:
        sem = asyncio.Semaphore(concurrency)

        async def one(name: str) -> dict[str, Any]:
            async with sem:
                info: dict[str, Any] = await fs._info(name)
                return info

        return list(await asyncio.gather(*(one(n) for n in names)))

    try:
        infos: list[dict[str, Any]] = sync(fs.loop, run)
        return infos
    except FileNotFoundError as e:
        raise InputError(f"url: an object vanished while listing: {e}") from e


def class_layout(listing: Listing) -> dict[str, list[str]]:
    """``{class: [urls]}`` by the local directory rule (see the module docstring), classes and URLs sorted."""
    root = listing.root
    loose: list[str] = []
    classes: dict[str, list[str]] = {}
    for u in listing.urls:
        rel = u[len(root):] if u.startswith(root) else u.rsplit("/", 1)[-1]
        head, sep, _ = rel.partition("/")
        if sep:
            classes.setdefault(head, []).append(u)
        else:
            loose.append(u)
    if not classes:
        return {DEFAULT_CLASS: loose}
    if loose:
        raise InputError(f"fps: prefix {root!r} mixes class prefixes with loose objects "
                         f"{[u[len(root):] for u in loose[:5]]}; move them into a class prefix or pass a list")
    return {name: classes[name] for name in sorted(classes)}


def shard_of(urls: Sequence[str], n_shards: int) -> np.ndarray:
    """The shard (``0 .. n_shards-1``) of each URL: the first 8 bytes of ``sha256(url)`` modulo ``n_shards``.

    Deterministic on every machine and stable under additions: a new object never moves the others.
    """
    if not isinstance(n_shards, (int, np.integer)) or isinstance(n_shards, bool) or n_shards < 1:
        raise InputError(f"n_shards must be a positive int, got {short_repr(n_shards)}")
    out = np.fromiter((int.from_bytes(hashlib.sha256(u.encode("utf-8", "surrogateescape")).digest()[:8], "big")
                       for u in urls), dtype=np.uint64, count=len(urls))
    return (out % np.uint64(n_shards)).astype(np.int64)
