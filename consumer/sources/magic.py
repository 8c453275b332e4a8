"""libmagic (python-magic, in process): the one module that imports ``magic``.

:func:`describe_files` gives the raw libmagic description and MIME type of local files, in a thread pool:
python-magic calls libmagic through ctypes, which releases the GIL, so threads use every core without the
start-up cost, pickling and ``if __name__ == "__main__"`` pitfalls of processes (measured in
``docs/design.md``). Each thread has its own magic cookie; nothing is shared. Turning a description into
a header (normalisation) is :mod:`consumer.catalog.headers`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

from ..errors import InputError, MissingDependencyError
from ..util.progress import progress_bar

__all__ = ["describe_files", "libmagic_version", "import_magic"]

_PARALLEL_MIN_FILES = 64  # below this a thread pool costs more than it saves
_CHUNK = 256  # files per task: one future per chunk, not per file


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

    Runs in ``workers`` threads (default: the number of cores), handed ``chunk`` files at a time, with
    one tqdm progress bar when ``verbose``. Each thread owns its magic cookies. Being a generator,
    the caller can store results chunk by chunk while later chunks are still being computed.
    """
    magic = import_magic()
    local = threading.local()
    want_desc, want_mime = "description" in kinds, "mime" in kinds

    def one(path: str) -> tuple[str | None, str | None]:
        cookies = getattr(local, "cookies", None)
        if cookies is None:
            cookies = local.cookies = (magic.Magic(), magic.Magic(mime=True))
        try:
            # libmagic would describe a symlink itself ("symbolic link to ..."), not the bytes we serve
            target = os.path.realpath(path) if os.path.islink(path) else path
            return (cookies[0].from_file(target) if want_desc else None,
                    cookies[1].from_file(target) if want_mime else None)
        except Exception as e:  # noqa: BLE001  (libmagic reports unreadable files as MagicException)
            raise InputError(f"fps: libmagic could not read {path!r}: {e}") from e

    def run(part: Sequence[str]) -> list[tuple[str | None, str | None]]:
        return [one(p) for p in part]

    n_workers = workers or os.cpu_count() or 1
    parts = [paths[i:i + chunk] for i in range(0, len(paths), chunk)]
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
