"""Storage settings: where a dataset keeps what it computes, and how it reaches object storage.

:class:`Storage` is one frozen value, made once from the user's ``storage_options``, ``cache_dir`` and
``remote_cache`` (:meth:`Storage.of`, which validates them) beside :class:`~consumer.spec.Spec`, and passed whole
to every part that needs one of them: the sources (fsspec options, the read-through cache), the catalog and the
index cache (the cache directory), packed stores at URLs (their index files are copied under the cache
directory). Only the user-facing entry points (``Consumer(...)``, ``Consumer.from_packed``, ``open_packed``,
``inspect_packed``, ``verify_packed``) take the three settings as keywords; everything below takes a ``Storage``.

- :func:`default_cache_dir` / :func:`check_cache_dir`: the cache directory (``cache_dir=None`` is the
  default place, ``False`` keeps everything in memory);
- :func:`parse_size`: byte counts written as ``"20GB"`` / ``"512MiB"`` (the read-through cache's size).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError, short_repr

__all__ = ["Storage", "default_cache_dir", "check_cache_dir", "parse_size"]


def default_cache_dir() -> str:
    """``$CONSUMER_CACHE_DIR``, else ``$XDG_CACHE_HOME/consumer``, else ``~/.cache/consumer``."""
    env = os.environ.get("CONSUMER_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "consumer")


def check_cache_dir(cache_dir) -> str | None:
    """Validate ``cache_dir``: a directory path, ``None`` (the default location) or ``False`` (in memory).

    Returns the absolute directory, or None for in-memory.
    """
    if cache_dir is False:
        return None
    if cache_dir is None:
        return default_cache_dir()
    if isinstance(cache_dir, (str, os.PathLike)) and not isinstance(cache_dir, bool) and os.fspath(cache_dir):
        if isinstance(cache_dir, str) and "://" in cache_dir:
            raise InputError(f"cache_dir must be a local directory (it holds the catalog and memory-mapped "
                             f"indexes), got the URL {cache_dir!r}")
        path = os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))
        if os.path.exists(path) and not os.path.isdir(path):
            raise InputError(f"cache_dir must be a directory, got the file {path!r}")
        parent = os.path.dirname(path)
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if parent and not os.path.isdir(parent):
            raise InputError(f"cache_dir {path!r} cannot be a directory: {parent!r} is a file")
        return path
    raise InputError("cache_dir must be a directory path, None (default location) or False (in memory), "
                     f"got {short_repr(cache_dir)}")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpP]?)(i?)([bB]?)\s*$")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def parse_size(value: Any, what: str = "size") -> int:
    """A byte count from an int or a size string: ``"20GB"`` (10^9), ``"20GiB"`` (2^30), ``"512M"``,
    ``"1.5T"``, ``"4096"``. Decimal units unless ``i`` is given. Raises :class:`InputError` naming ``what``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value < 0:
            raise InputError(f"{what} must be >= 0 bytes, got {short_repr(value)}")
        return int(value)
    m = _SIZE.match(value) if isinstance(value, str) else None
    if m is None:
        raise InputError(f"{what} must be a byte count or a size such as '20GB' or '512MiB', got {short_repr(value)}")
    number, unit, binary, _ = m.groups()
    base = 1024 if binary else 1000
    if binary and not unit:
        raise InputError(f"{what}: 'i' needs a unit letter (KiB, MiB, GiB), got {short_repr(value)}")
    return int(float(number) * base ** _POWERS[unit.lower()])


@dataclass(frozen=True)
class Storage:
    """Where a dataset keeps what it computes and how it reaches object storage (one value, passed whole).

    ``options``: fsspec ``storage_options`` for URLs (credentials, ``endpoint_url``, ...; empty for none);
    ``cache_dir``: the absolute cache directory (catalog, index cache, copies of remote stores' index files, the
    read-through cache), or None to keep everything in memory (``cache_dir=False``); ``remote_cache``: bytes of
    the read-through cache of remote objects under ``cache_dir`` (None: no such cache); ``readahead``: how a
    local packed store is read (None: the kernel's read-ahead unless the store is bigger than the memory the page
    cache can use; False: only the rows a batch wants; True: always read-ahead; see
    :mod:`consumer.sources.page_cache`). Make it with :meth:`of`, which validates the user's arguments.
    """

    options: Mapping[str, Any] = field(default_factory=dict, repr=False)  # may hold credentials: never printed
    cache_dir: str | None = None
    remote_cache: int | None = None
    options_given: bool = False  # storage_options was passed (even as {}): only URLs take it
    readahead: bool | None = None

    @classmethod
    def of(cls, storage_options: Mapping[str, Any] | None = None, cache_dir: Any = None,
           remote_cache: Any = None, readahead: bool | None = None) -> Storage:
        """The validated settings: ``cache_dir`` a directory, None (the default place) or False (in memory);
        ``remote_cache`` an int or a size such as ``"20GB"`` (needs a cache directory); ``storage_options`` a
        dict or None; ``readahead`` None, True or False. InputError naming the argument and the value otherwise."""
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise InputError(f"storage_options must be a dict of fsspec options or None, got "
                             f"{short_repr(storage_options)}")
        if readahead is not None and not isinstance(readahead, bool):
            raise InputError(f"readahead must be None (decide by the store's size), True or False, got "
                             f"{short_repr(readahead)}")
        root = check_cache_dir(cache_dir)
        size = None if remote_cache is None else parse_size(remote_cache, "remote_cache")
        if size is not None and root is None:
            raise InputError("remote_cache needs a cache_dir (it lives there); got cache_dir=False")
        return cls(dict(storage_options or {}), root, size, storage_options is not None, readahead)

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], what: str) -> Storage:
        """:meth:`of` from the keyword arguments a public function took (``storage_options``, ``cache_dir``,
        ``remote_cache``, ``readahead``; ``what`` names the function); InputError naming any other keyword."""
        unknown = sorted(set(kwargs) - {"storage_options", "cache_dir", "remote_cache", "readahead"})
        if unknown:
            raise InputError(f"{what} got unexpected options {unknown}; it takes storage_options, cache_dir and "
                             "remote_cache (a store at a URL) and readahead (a local store)")
        return cls.of(**kwargs)

    @property
    def local_only(self) -> bool:
        """True when no setting of object storage was given (neither ``storage_options`` nor ``remote_cache``)."""
        return not self.options_given and self.remote_cache is None

    def read_through_dir(self) -> str | None:
        """The directory of the read-through cache of remote objects (None without ``remote_cache``)."""
        return None if self.remote_cache is None or self.cache_dir is None else os.path.join(self.cache_dir, "remote")
