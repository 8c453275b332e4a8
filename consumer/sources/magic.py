"""libmagic (python-magic, in process): the one module that imports ``magic``.

:func:`describe_files` gives the raw libmagic description and MIME type of local files, in a thread pool:
python-magic calls libmagic through ctypes, which releases the GIL, so threads use every core without the
start-up cost, pickling and ``if __name__ == "__main__"`` pitfalls of processes (measured in
``docs/design.md``). Each thread has its own magic cookie; nothing is shared. A file is opened once and described
by descriptor (one libmagic call per file and column), its description equal to libmagic by path. Turning a
description into a header (normalisation) is :mod:`consumer.catalog.headers`.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

from ..errors import InputError, MissingDependencyError
from ..util.progress import progress_bar

__all__ = ["describe_files", "libmagic_version", "import_magic"]

_PARALLEL_MIN_FILES = 64  # below this a thread pool costs more than it saves
_CHUNK = 256  # at most this many files per task: one future per task, not per file
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # NONBLOCK: a FIFO's open never waits
_BY_STAT = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX  # mode bits libmagic by path names in the description
_TASKS_PER_WORKER = 8  # fewer files per task when the paths would give a worker less (every thread kept busy)


def import_magic() -> ModuleType:
    """The ``magic`` module (python-magic), or MissingDependencyError naming the install commands."""
    try:
        import magic  # noqa: PLC0415  (the one home of this dependency)
    except ImportError as e:  # python-magic missing, or libmagic1 missing underneath it
        raise MissingDependencyError(
            "metadata='file'/'mime' needs python-magic and the system library libmagic "
            f"(pip install python-magic; apt-get install libmagic1): {e}") from e
    return magic


def libmagic_version() -> int | None:
    """The libmagic version number (e.g. 544 for 5.44), or None when libmagic is unavailable."""
    try:
        magic = import_magic()
    except MissingDependencyError:
        return None
    try:
        return int(magic.version())
    except Exception:  # noqa: BLE001  (old python-magic without version(): report unknown)
        return None


def describe_files(paths: Sequence[str], *, kinds: Sequence[str] = ("description", "mime"), verbose: bool = False,
                   workers: int | None = None, chunk: int = _CHUNK) -> Iterator[tuple[str | None, str | None]]:
    """Raw libmagic ``(description, MIME type)`` of each path, in order (a generator); a kind not in
    ``kinds`` is not computed and comes back as None.

    Runs in ``workers`` threads (default: the number of cores), handed at most ``chunk`` files at a time and
    fewer when that would leave a thread without ``_TASKS_PER_WORKER`` tasks (a caller's chunk never idles a
    core), with one tqdm progress bar when ``verbose``. Each thread owns its magic cookies. Being a generator,
    the caller can store results chunk by chunk while later chunks are still being computed.
    """
    magic = import_magic()
    local = threading.local()
    want_desc, want_mime = "description" in kinds, "mime" in kinds

    def one(path: str) -> tuple[str | None, str | None]:
        cookies = getattr(local, "cookies", None)
        if cookies is None:
            cookies = local.cookies = (magic.Magic() if want_desc else None,
                                       magic.Magic(mime=True) if want_mime else None)
        try:
            # by descriptor: our one open follows a symlink to the bytes we serve (libmagic by path would describe
            # the link itself) and spares python-magic's check-open and libmagic's own open and stat of the path
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as e:
            raise InputError(f"fps: libmagic could not read {path!r}: {e}") from e
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a special file is never read (a FIFO would block)
                raise InputError(f"fps: {path!r} is not a regular file; libmagic describes regular files only")
            if st.st_size == 0 or st.st_mode & _BY_STAT:  # what libmagic by path reads from the stat ("empty",
                target = os.path.realpath(path)  # inode/x-empty, "setuid ..."): described by path as before
                return (cookies[0].from_file(target) if cookies[0] is not None else None,
                        cookies[1].from_file(target) if cookies[1] is not None else None)
            return (cookies[0].from_descriptor(fd) if cookies[0] is not None else None,
                    cookies[1].from_descriptor(fd) if cookies[1] is not None else None)
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001  (libmagic reports unreadable files as MagicException)
            raise InputError(f"fps: libmagic could not read {path!r}: {e}") from e
        finally:
            os.close(fd)

    def run(part: Sequence[str]) -> list[tuple[str | None, str | None]]:
        return [one(p) for p in part]

    n_workers = workers or os.cpu_count() or 1
    step = max(1, min(chunk, -(-len(paths) // (n_workers * _TASKS_PER_WORKER))))
    parts = [paths[i:i + step] for i in range(0, len(paths), step)]
    bar = progress_bar(len(paths), verbose, "libmagic")
    pool = None
    results: Iterator[list[tuple[str | None, str | None]]]
    try:
        if n_workers == 1 or len(paths) < _PARALLEL_MIN_FILES:
            results = map(run, parts)
        else:
            pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="consumer-magic")
            results = pool.map(run, parts)
        for res in results:
            bar.update(len(res))
            yield from res
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
