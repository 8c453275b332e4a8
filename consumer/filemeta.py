"""File-type headers: libmagic (python-magic, in process) and their normalisation.

This is the only module that imports ``magic``. A header describes a file's *type*, never the
individual file: the path (which leaks the label), BuildIDs, hashes, UUIDs, timestamps, embedded
file names and per-file sizes are removed, white space is folded and the text is capped at
:data:`MAX_HEADER_BYTES` bytes (UTF-8, cut on a character boundary).

Modes (``metadata=``): ``"file"`` (libmagic description), ``"mime"`` (MIME type), ``None`` (no
header) or a callable ``path -> str`` (its result is normalised the same way).

libmagic runs once per file at build time, in a thread pool: python-magic calls libmagic through
ctypes, which releases the GIL, so threads use every core without the start-up cost, pickling and
``if __name__ == "__main__"`` pitfalls of processes (measured in ``docs/design.md``). Each thread
has its own magic cookie; nothing is shared.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from .errors import InputError, MissingDependencyError, short_repr
from .progress import progress_bar

__all__ = ["MAX_HEADER_BYTES", "METADATA_MODES", "normalise_description", "describe_files", "headers_from",
           "libmagic_version", "check_metadata"]

MAX_HEADER_BYTES = 96
METADATA_MODES = ("file", "mime")
_PARALLEL_MIN_FILES = 64  # below this a thread pool costs more than it saves
_CHUNK = 256  # files per task: one future per chunk, not per file

_DROP_FIELD = re.compile(
    r"(BuildID|timestamp|modified|created|last (?:accessed|written)|\bdate\b|UUID|uuid|serial|"
    r"was \"|\bname\b|checksum|\bcrc\d*\b|\bmd5\b|\bsha\d*\b|\.py size|original size|\bsize\b)",
    re.IGNORECASE)
_HEX = re.compile(r"\b(?:0x)?[0-9a-fA-F]{8,}\b")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_LONG_LINES = re.compile(r"(with very long lines) \(\d+\)")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b|\b\d{4}-\d{2}-\d{2}\b")
_SPACE = re.compile(r"\s+")
_MIN_LEAK = 4  # shorter file names are too likely to be words of the description itself
HEADER_RULES_VERSION = 1  # bump when normalise_description changes: it is part of every cache key


def normalise_description(text: str, path: str | None = None) -> str:
    """Normalise a type description so it names the type, not the file (see the module docstring)."""
    text = _SPACE.sub(" ", str(text)).strip()
    if path:
        name = os.path.basename(path)
        # the full path, then the bare name if it looks like a file name (has an extension), each as
        # a whole token only: files named "t" or "text" must not eat the word "text"
        leaks = [path] + ([name] if len(name) >= _MIN_LEAK and "." in name.strip(".") else [])
        for leak in leaks:
            if leak in text:  # a pattern per path is compiled only when it can match (it rarely does)
                text = re.sub(rf"(?<![\w.]){re.escape(leak)}(?![\w.])", "", text)
    text = _LONG_LINES.sub(r"\1", text)
    fields = []
    for field in text.split(","):
        if _DROP_FIELD.search(field) or _TIME.search(field):
            continue
        field = _UUID.sub("", field)
        field = _HEX.sub("", field)
        field = _QUOTED.sub("", field)
        field = _SPACE.sub(" ", field).strip(" :;=")
        if field:
            fields.append(field)
    out = ", ".join(fields)
    raw = out.encode("utf-8")[:MAX_HEADER_BYTES]
    return raw.decode("utf-8", errors="ignore").rstrip(" ,")


def _import_magic():
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
        magic = _import_magic()
    except MissingDependencyError:
        return None
    try:
        return int(magic.version())
    except Exception:  # noqa: BLE001  (old python-magic without version(): report unknown)
        return None


def check_metadata(metadata) -> None:
    """Validate a ``metadata`` argument (mode name, None or callable), raising :class:`InputError`."""
    if metadata is None or callable(metadata) or metadata in METADATA_MODES:
        return
    raise InputError(f"metadata must be one of {METADATA_MODES}, None or a callable path -> str, "
                     f"got {short_repr(metadata)}")


def describe_files(paths: Sequence[str], *, kinds: Sequence[str] = ("description", "mime"), verbose: bool = False,
                   workers: int | None = None, chunk: int = _CHUNK) -> Iterator[tuple[str | None, str | None]]:
    """Raw libmagic ``(description, MIME type)`` of each path, in order (a generator); a kind not in
    ``kinds`` is not computed and comes back as None.

    Runs in ``workers`` threads (default: the number of cores), handed ``chunk`` files at a time, with
    one tqdm progress bar when ``verbose``. Each thread owns its magic cookies. Being a generator,
    the caller can store results chunk by chunk while later chunks are still being computed.
    """
    magic = _import_magic()
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


def headers_from(metadata, paths: Sequence[str], descriptions: Sequence[str | None],
                 mimes: Sequence[str | None]) -> list[str]:
    """One normalised header per path for a ``metadata`` mode, from libmagic results (or the callable)."""
    check_metadata(metadata)
    if metadata is None:
        return [""] * len(paths)
    if callable(metadata):
        out = []
        for path in paths:
            text = metadata(path)
            if not isinstance(text, str):
                raise InputError(f"metadata callable must return str, got {short_repr(text)} for {path!r}")
            out.append(normalise_description(text, path))
        return out
    raw = descriptions if metadata == "file" else mimes
    return [normalise_description(text or "", path) for text, path in zip(raw, paths)]
