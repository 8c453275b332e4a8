"""Small file-system helpers shared by every module that touches disk.

- :func:`stat_regular`: ``os.stat`` a path and refuse anything that is not a regular file, before
  anything could block on a FIFO or a device;
- :func:`temp_path` / :func:`fsync_dir` / :func:`atomic_write_bytes`: atomic writes (temporary file in
  the target directory, fsync, ``os.replace``), so a killed writer never leaves a file that looks
  complete.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path

from .errors import InputError

__all__ = ["stat_regular", "temp_path", "fsync_dir", "atomic_write_bytes", "sha256_file"]


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
    tmp = temp_path(final)
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
