"""Small file-system helpers shared by every module that touches disk.

- :func:`stat_regular`: ``os.stat`` a path and refuse anything that is not a regular file, before
  anything could block on a FIFO or a device;
- :func:`temp_path` / :func:`open_temp` / :func:`fsync_dir` / :func:`atomic_write_bytes`: the one
  temporary-file scheme of the package. A temporary file (or directory) for ``dir/name`` is
  ``dir/.name.<12 hex>.tmp``: hidden, in the target directory (so ``os.replace`` is atomic), created
  exclusively. Writers fill it, fsync it and rename it into place, so a killed writer never leaves
  a file that looks complete; ``consumer cache clear`` recognises leftovers by that pattern.
- :func:`check_path`: a path without NUL bytes (the OS cannot name such a file);
- :func:`ensure_directory`: create a directory (``cache_dir``), turning "a parent is a file" and other
  OS refusals into :class:`InputError` naming the path and the part that is in the way;
- :func:`load_json_bounded`: JSON metadata (sidecars, descriptions) with a size and nesting cap, as
  :class:`FormatError` naming the file, never ``RecursionError`` or a raw decoder error;
- :func:`space_error` / :func:`space_for`: the one translation of a write that ran out of room (``ENOSPC``,
  ``EDQUOT``, ``EFBIG`` from ``RLIMIT_FSIZE``) into :class:`StorageFullError` naming the path, the bytes
  needed, the bytes free and the limit that was hit.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..errors import FormatError, InputError, StorageFullError, short_repr

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "atomic_write_bytes",
    "check_path",
    "ensure_directory",
    "fsync_dir",
    "load_json_bounded",
    "sha256_file",
    "SPACE_ERRNOS",
    "file_size_limit",
    "free_bytes",
    "space_error",
    "space_for",
    "stat_regular",
    "temp_path",
    "pack_paths",
    "unpack_paths",
    "is_temp_name",
    "open_temp",
    "discard",
    "move_aside",
    "write_npy",
]

MAX_JSON_BYTES = 256 * 2**20
"""Largest JSON metadata file :func:`load_json_bounded` reads by default (256 MiB)."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays/objects :func:`load_json_bounded` accepts by default."""


_CHUNK = 1 << 16  # paths encoded at a time
_WINDOW = 1 << 24  # bytes of packed paths decoded at a time


def pack_paths(paths: Sequence[str]) -> np.ndarray:
    """Paths as one uint8 array: their exact bytes (``os.fsencode``) joined by NUL; see :func:`unpack_paths`.
    Encoded a chunk at a time into the one output array (twice: sizes, then bytes), so that 10^7 paths never
    exist as a second joined copy."""
    chunks = range(0, len(paths), _CHUNK)
    sizes = [len(os.fsencode("\0".join(paths[i:i + _CHUNK]))) for i in chunks]
    out = np.empty(sum(sizes) + max(len(sizes) - 1, 0), dtype=np.uint8)
    at = 0
    for i, n in zip(chunks, sizes):
        if i:
            out[at] = 0
            at += 1
        out[at:at + n] = np.frombuffer(os.fsencode("\0".join(paths[i:i + _CHUNK])), dtype=np.uint8)
        at += n
    return out


def unpack_paths(blob: np.ndarray) -> list[str]:
    """The paths :func:`pack_paths` stored (an empty blob is one empty path, as ``"".split`` gives); decoded a
    chunk of paths at a time (no whole-blob copy as bytes and as one str)."""
    blob = np.ascontiguousarray(blob, dtype=np.uint8)
    out: list[str] = []
    start = 0
    while True:
        window = blob[start:start + _WINDOW].tobytes()
        cut = window.rfind(b"\0") if start + _WINDOW < blob.size else -1  # the window's last whole path ends there
        if cut < 0:
            if start + _WINDOW < blob.size:  # no separator in a whole window: one path longer than it
                window, cut = blob[start:].tobytes(), -1
            out.extend(os.fsdecode(window).split("\0"))
            return out
        out.extend(os.fsdecode(window[:cut]).split("\0"))
        start += cut + 1


def check_path(path: str | bytes | os.PathLike, what: str) -> str | bytes:
    """``os.fspath(path)``, refusing a path with a NUL byte (InputError naming ``what`` and the path)."""
    text = os.fspath(path)
    if ("\x00" if isinstance(text, str) else b"\x00") in text:
        raise InputError(f"{what}: a path cannot contain a NUL byte, got {short_repr(text)}")
    return text


def stat_regular(path: str | os.PathLike, what: str) -> os.stat_result:
    """``os.stat(path)``, raising :class:`InputError` (naming ``what`` and the path) unless it is a
    readable regular file."""
    check_path(path, what)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{what}: file not found: {os.fspath(path)!r}") from None
    except OSError as e:  # ELOOP (a symlink loop), EACCES on a parent, ENAMETOOLONG, ...
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


def ensure_directory(path: str | os.PathLike, what: str) -> str:
    """Create directory ``path`` (and parents) if needed; return it as an absolute ``str``.

    InputError naming ``what`` and the path when it cannot be a directory: a NUL byte, a part of it that
    is a file (``NotADirectoryError``: the message names that part), no permission, a read-only file
    system, a name too long.
    """
    text = os.path.abspath(os.fsdecode(check_path(path, what)))
    try:
        os.makedirs(text, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _first_non_directory(text)
        raise InputError(f"{what}: cannot use {text!r} as a directory: {blocker!r} is a file, not a directory") \
            from None
    except OSError as e:
        raise InputError(f"{what}: cannot create the directory {text!r}: {e.strerror}") from None
    return text


def _first_non_directory(path: str) -> str:
    """The first existing part of ``path`` (from the root down) that is not a directory."""
    parts = []
    head = path
    while True:
        parts.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    for part in reversed(parts):
        if os.path.lexists(part) and not os.path.isdir(part):
            return part
    return path


def _json_depth(raw: bytes) -> int:
    """Deepest nesting of ``[``/``{`` outside JSON strings, computed with numpy (no recursion, no loop per byte)."""
    a = np.frombuffer(raw, dtype=np.uint8)
    if a.size == 0:
        return 0
    idx = np.arange(a.size)
    backslash = a == 0x5C
    # length of the run of backslashes right before each byte: odd means the byte is escaped
    last_plain = np.maximum.accumulate(np.where(backslash, -1, idx))
    run_before = np.empty(a.size, dtype=np.int64)
    run_before[0] = 0
    run_before[1:] = idx[:-1] - last_plain[:-1]
    quote = (a == 0x22) & (run_before % 2 == 0)
    inside = (np.cumsum(quote) - quote) % 2 == 1  # quotes before this byte: odd means inside a string
    step = np.zeros(a.size, dtype=np.int64)
    step[((a == 0x5B) | (a == 0x7B)) & ~inside] = 1
    step[((a == 0x5D) | (a == 0x7D)) & ~inside] = -1
    return int(np.cumsum(step).max())


def load_json_bounded(text: str | bytes, what: str, *, max_bytes: int = MAX_JSON_BYTES,
                      max_depth: int = MAX_JSON_DEPTH) -> object:
    """Parse JSON metadata; FormatError naming ``what`` (e.g. the file) for anything wrong with it.

    Refused: more than ``max_bytes`` bytes, arrays/objects nested deeper than ``max_depth`` (checked
    before parsing, so a deeply nested file never reaches the recursive decoder), bytes that are not
    UTF-8, and invalid JSON (including integers too long for Python's int conversion).
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if len(raw) > max_bytes:
        raise FormatError(f"{what}: JSON of {len(raw)} bytes, more than the cap of {max_bytes} bytes")
    depth = _json_depth(raw)
    if depth > max_depth:
        raise FormatError(f"{what}: JSON nested {depth} levels deep, more than the cap of {max_depth}")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise FormatError(f"{what}: not UTF-8 JSON: {e}") from None
    except RecursionError:  # not reachable after the depth check; kept so no RecursionError can escape
        raise FormatError(f"{what}: JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, and int conversions past sys.get_int_max_str_digits()
        raise FormatError(f"{what}: invalid JSON: {e}") from None


SPACE_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
                errno.EFBIG: "file size limit reached"}
"""The ``errno`` values of a write that ran out of room, and how the message words each."""


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes free to an unprivileged writer on the file system holding ``path`` (its nearest existing parent)."""
    probe = os.path.abspath(os.fspath(path))
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def file_size_limit() -> int | None:
    """This process's ``RLIMIT_FSIZE`` in bytes, None when unlimited (or unknown)."""
    try:
        import resource  # noqa: PLC0415  (POSIX only)

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def space_error(path: str | os.PathLike, need: int, what: str, code: int = errno.ENOSPC) -> StorageFullError:
    """The :class:`StorageFullError` of a write to ``path`` that ran out of room (``code``: an errno of
    :data:`SPACE_ERRNOS`): names ``what`` (the argument, e.g. ``cache_dir``), the path, the bytes the write
    needed, the bytes free there and, for ``EFBIG``, the file-size limit."""
    where = os.fspath(path)
    free = free_bytes(where)
    detail = [f"{need} bytes needed"]
    if free is not None:
        detail.append(f"{free} bytes free")
    limit = file_size_limit()
    if code == errno.EFBIG and limit is not None:
        detail.append(f"file size limit (RLIMIT_FSIZE) {limit} bytes")
    reason = SPACE_ERRNOS.get(code, os.strerror(code))
    return StorageFullError(f"{what}: cannot write {where!r}: {reason} ({', '.join(detail)}); nothing was left "
                            "half-written and what was there is kept: free space (or raise the limit) and run again, "
                            "or write elsewhere")


@contextmanager
def space_for(path: str | os.PathLike, need: int, what: str) -> Iterator[None]:
    """Run the ``with`` block (a write of about ``need`` bytes to ``path``), turning an ``OSError`` that means
    "out of room" (:data:`SPACE_ERRNOS`) into :func:`space_error`; other errors pass unchanged."""
    try:
        yield
    except OSError as e:
        if e.errno in SPACE_ERRNOS:
            raise space_error(path, need, what, e.errno) from e
        raise


def move_aside(path: str) -> None:
    """Keep a damaged artefact of ours for inspection (never delete it) and free its name: renamed to
    ``<path>.corrupt-<time>-<pid>``."""
    os.replace(path, f"{path}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")


def write_npy(f: Any, arr: np.ndarray) -> None:
    """``np.save`` of a C-contiguous array, the same bytes, written with ``f.write``: numpy's own ``tofile``
    reports a short write as a bare ``OSError`` without an errno, which would hide a full disk or a size limit."""
    np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(arr))
    if arr.size:
        f.write(arr.reshape(-1).data.cast("B"))
