"""Small file-system helpers shared by every module that touches disk.

- :func:`stat_regular`: ``os.stat`` a path and refuse anything that is not a regular file, before
  anything could block on a FIFO or a device;
- :func:`temp_path` / :func:`open_temp` / :func:`fsync_dir` / :func:`atomic_write_bytes`: the one
  temporary-file scheme of the package. A temporary file (or directory) for ``dir/name`` is
  ``dir/.name.<12 hex>.tmp``: hidden, in the target directory (so ``os.replace`` is atomic), created
  exclusively. Writers fill it, fsync it and rename it into place, so a killed writer never leaves
  a file that looks complete; ``consumer cache clear`` recognises leftovers by that pattern.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import InputError

__all__ = ["stat_regular", "temp_path", "is_temp_name", "open_temp", "discard", "fsync_dir", "atomic_write_bytes",
           "sha256_file"]


def stat_regular(path: str | os.PathLike, what: str) -> os.stat_result:
    """``os.stat(path)``, raising :class:`InputError` (naming ``what`` and the path) unless it is a
    readable regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what}: file not found: {os.fspath(path)!r}") from None
    except OSError as e:
        raise InputError(f"{what}: cannot stat {os.fspath(path)!r}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what}: {os.fspath(path)!r} is a directory, not a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what}: {os.fspath(path)!r} is not a regular file (FIFO, device or socket), refused")
    return st


def temp_path(final: str | os.PathLike) -> Path:
    """A unique temporary name in the same directory as ``final`` (so ``os.replace`` is atomic)."""
    final = Path(final)
    return final.parent / f".{final.name}.{secrets.token_hex(6)}.tmp"


_TEMP_NAME = re.compile(r"\..+\.[0-9a-f]{12}\.tmp(\..*)?")


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of :func:`temp_path`'s names (or a file made under such a prefix)."""
    return bool(_TEMP_NAME.fullmatch(name))


def open_temp(final: str | os.PathLike, what: str = "path") -> tuple[Path, BinaryIO]:
    """Create a temporary file for ``final`` exclusively and open it for writing (binary).

    Its mode is ``0o666`` less the umask, as an ordinary new file (``tempfile.mkstemp``'s 0600 would
    survive the rename). InputError (naming ``what``) when the directory does not exist.
    """
    final = Path(final)
    directory = final.parent if str(final.parent) else Path(".")
    if not directory.is_dir():
        raise InputError(f"{what}: directory does not exist: {str(directory)!r}")
    for _ in range(100):
        tmp = temp_path(final)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        return tmp, os.fdopen(fd, "wb")
    raise InputError(f"{what}: could not create a temporary file next to {str(final)!r}")


def discard(path: str | os.PathLike | None) -> None:
    """Remove a temporary file if it exists (cleanup after a failed write)."""
    if path is not None:
        Path(path).unlink(missing_ok=True)


def fsync_dir(directory: str | os.PathLike) -> None:
    """fsync a directory so that renames inside it survive a crash (best effort)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(final: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``final`` atomically: temp file, fsync, rename, fsync of the directory."""
    final = Path(final)
    tmp, f = open_temp(final)
    try:
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        discard(tmp)
        raise
    fsync_dir(final.parent)


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
