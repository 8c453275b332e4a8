"""libmagic descriptions of remote objects from a few byte ranges, without downloading whole objects.

For each object, :func:`describe_prefixes` fetches (with concurrent range requests, through
:class:`~consumer.sources.range_reader.RemoteReader`):

- the whole object when it is at most ``head_bytes + tail_bytes`` long: the result is exactly what
  libmagic says of a local copy;
- otherwise its first ``head_bytes`` and last ``tail_bytes``, plus, for ELF files, the ranges
  libmagic's ELF parser reads through the file descriptor (program headers, the ``PT_DYNAMIC``,
  ``PT_INTERP`` and ``PT_NOTE`` segments, the section header table, the section-name table and the
  ``SHT_NOTE`` sections), found by parsing the fetched header (one extra round of requests for ELF).

The fetched ranges are written at their offsets into a **sparse temporary file of the object's true
size** (the gaps read as zeros and cost no disk), and libmagic describes that file with
``MAGIC_PARAM_BYTES_MAX`` set to ``head_bytes``, so its content tests see only real bytes. Formats
whose description depends on bytes elsewhere in a large object keep a coarser description. Measured by
the probe ``remote_headers`` (``python -m benchmarks probe remote_headers``) on 1,186 system files of 368
extensions (see ``docs/remote.md``):
with the defaults (64 KiB + 64 KiB) 9 raw descriptions differ from the local copies' (8 TrueType fonts:
name table counts; 1 JSON file above 128 KiB: libmagic validates JSON as a whole; GNU ``.mo`` catalogs can
lose their project-id string too); with ``head_bytes=1 MiB`` none.

libmagic is imported through :mod:`consumer.sources.magic` (its one home) and runs in a thread pool, one
magic cookie per thread, like the local path.
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..errors import InputError, short_repr
from .base import Describer
from .magic import import_magic
from .range_reader import RemoteReader

__all__ = ["DEFAULT_HEAD_BYTES", "DEFAULT_TAIL_BYTES", "describe_prefixes", "iter_describe_prefixes", "describer",
           "plan_ranges", "elf_ranges"]

DEFAULT_HEAD_BYTES = 64 << 10
DEFAULT_TAIL_BYTES = 64 << 10
_CHUNK = 256  # objects per round of requests (bounds the memory held at once)
_MAX_ELF_RANGE = 1 << 20  # never fetch more than this per extra ELF range
_MAX_ELF_RANGES = 64


def plan_ranges(size: int, head_bytes: int, tail_bytes: int) -> list[tuple[int, int]]:
    """The ``(start, length)`` ranges fetched first for an object of ``size`` bytes."""
    if size <= head_bytes + tail_bytes:
        return [(0, size)] if size else []
    return [(0, head_bytes), (size - tail_bytes, tail_bytes)]


def elf_ranges(pieces: Mapping[int, bytes], size: int) -> list[tuple[int, int]]:
    """Extra ``(start, length)`` ranges libmagic's ELF parser reads, from the ELF header in ``pieces``
    (``{offset: bytes}`` already fetched); empty for a non-ELF object or unreadable headers."""
    head = pieces.get(0, b"")
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return []
    is64, end = head[4] == 2, "<" if head[5] == 1 else ">"

    def read(offset: int, length: int) -> bytes | None:
        for start, data in pieces.items():
            if start <= offset and offset + length <= start + len(data):
                return data[offset - start:offset - start + length]
        return None

    if is64:
        phoff, shoff = struct.unpack_from(end + "QQ", head, 32)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(end + "HHHHH", head, 54)
    else:
        phoff, shoff = struct.unpack_from(end + "II", head, 28)
        phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(end + "HHHHH", head, 42)
    out: list[tuple[int, int]] = []

    def want(offset: int, length: int) -> None:
        if 0 <= offset < size and length > 0 and len(out) < _MAX_ELF_RANGES:
            out.append((offset, min(length, size - offset, _MAX_ELF_RANGE)))

    want(phoff, phentsize * phnum)
    want(shoff, shentsize * shnum)
    table = read(phoff, phentsize * phnum) if phnum and phentsize >= (56 if is64 else 32) else None
    for k in range(phnum if table is not None else 0):
        base = k * phentsize
        if is64:
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(end + "IIQQQQ", table or b"", base)
        else:
            p_type, p_offset, _, _, p_filesz = struct.unpack_from(end + "IIIII", table or b"", base)
        if p_type in (2, 3, 4):  # PT_DYNAMIC, PT_INTERP, PT_NOTE
            want(p_offset, p_filesz)
    sections = read(shoff, shentsize * shnum) if shnum and shentsize >= (64 if is64 else 40) else None
    for k in range(shnum if sections is not None else 0):
        base = k * shentsize
        if is64:
            _, sh_type, _, _, sh_offset, sh_size = struct.unpack_from(end + "IIQQQQ", sections or b"", base)
        else:
            _, sh_type, _, _, sh_offset, sh_size = struct.unpack_from(end + "IIIIII", sections or b"", base)
        if sh_type == 7 or k == shstrndx:  # SHT_NOTE, section names
            want(sh_offset, sh_size)
    return out


def _missing_ranges(pieces: Mapping[int, bytes], wanted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    have = sorted((s, s + len(d)) for s, d in pieces.items())
    out = []
    for start, length in wanted:
        if not any(a <= start and start + length <= b for a, b in have):
            out.append((start, length))
    return sorted(set(out))


def describe_prefixes(urls: Sequence[str], sizes: np.ndarray | Sequence[int] | None = None,
                      etags: Sequence[str | None] | None = None,
                      storage_options: Mapping[str, Any] | None = None, **kwargs: Any
                      ) -> list[tuple[str | None, str | None]]:
    """Raw libmagic ``(description, MIME type)`` of each remote object, in order: the list of
    :func:`iter_describe_prefixes` (same arguments)."""
    return list(iter_describe_prefixes(urls, sizes, etags, storage_options, **kwargs))


def iter_describe_prefixes(urls: Sequence[str], sizes: np.ndarray | Sequence[int] | None = None,
                           etags: Sequence[str | None] | None = None,
                           storage_options: Mapping[str, Any] | None = None, *,
                           head_bytes: int = DEFAULT_HEAD_BYTES, tail_bytes: int = DEFAULT_TAIL_BYTES,
                           kinds: Sequence[str] = ("description", "mime"), reader: RemoteReader | None = None,
                           workers: int | None = None, temp_dir: str | None = None, chunk: int = _CHUNK,
                           ) -> Iterator[tuple[str | None, str | None]]:
    """Raw libmagic ``(description, MIME type)`` of each remote object, in order, from a few byte ranges
    (see the module docstring); a kind not in ``kinds`` comes back as None.

    A generator, like :func:`consumer.sources.magic.describe_files`: objects are fetched and described ``chunk``
    at a time (one round of concurrent requests per chunk), so a caller can commit results chunk by chunk
    while later ones are still being fetched, and a killed run keeps what it committed.
    ``sizes`` / ``etags`` from a :class:`~consumer.sources.urls.Listing` avoid one ``info`` per object and make
    the fetches check the ETag (a changed object raises :class:`~consumer.errors.FileChangedError`).
    """
    for name, value, low in (("head_bytes", head_bytes, 1), ("tail_bytes", tail_bytes, 0), ("chunk", chunk, 1)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise InputError(f"{name} must be an int >= {low}, got {short_repr(value)}")
    magic = import_magic()
    own = reader is None
    reader = reader or RemoteReader(storage_options)
    try:
        sizes_a = (np.asarray(sizes, dtype=np.int64) if sizes is not None
                   else np.asarray([s for _, s in reader.stat(urls)], dtype=np.int64))
        if sizes_a.shape != (len(urls),):
            raise InputError(f"sizes must hold {len(urls)} values (one per url), got {short_repr(sizes)}")
        etag_list: list[str | None] = list(etags) if etags is not None else [None] * len(urls)
        local = threading.local()
        want_desc, want_mime = "description" in kinds, "mime" in kinds
        tmp_root = temp_dir or tempfile.gettempdir()

        def cookies(limited: bool) -> tuple[Any, Any]:
            key = "limited" if limited else "full"
            got = getattr(local, key, None)
            if got is None:
                got = (magic.Magic() if want_desc else None, magic.Magic(mime=True) if want_mime else None)
                if limited:
                    for c in got:
                        if c is not None:
                            c.setparam(magic.MAGIC_PARAM_BYTES_MAX, int(head_bytes))
                setattr(local, key, got)
            return got

        def one(job: tuple[str, int, dict[int, bytes]]) -> tuple[str | None, str | None]:
            url, size, pieces = job
            limited = size > head_bytes + tail_bytes
            desc_c, mime_c = cookies(limited)
            fd, path = tempfile.mkstemp(prefix=".consumer-magic-", dir=tmp_root)
            try:
                for start, data in pieces.items():
                    os.pwrite(fd, data, start)
                os.ftruncate(fd, size)
                return (desc_c.from_file(path) if desc_c else None, mime_c.from_file(path) if mime_c else None)
            except Exception as e:  # noqa: BLE001  (libmagic reports failures as MagicException)
                raise InputError(f"fps: libmagic could not describe {url!r}: {e}") from e
            finally:
                os.close(fd)
                os.unlink(path)

        n_workers = workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="consumer-magic") as pool:
            for lo in range(0, len(urls), chunk):
                idx = range(lo, min(lo + chunk, len(urls)))
                pieces: list[dict[int, bytes]] = [{} for _ in idx]
                plans = [plan_ranges(int(sizes_a[i]), int(head_bytes), int(tail_bytes)) for i in idx]
                _fetch_into(reader, urls, idx, plans, pieces, sizes_a, etag_list)
                extra = [_missing_ranges(p, elf_ranges(p, int(sizes_a[i])))
                         if sizes_a[i] > head_bytes + tail_bytes else [] for p, i in zip(pieces, idx)]
                if any(extra):
                    _fetch_into(reader, urls, idx, extra, pieces, sizes_a, etag_list)
                yield from pool.map(one, [(urls[i], int(sizes_a[i]), p) for i, p in zip(idx, pieces)])
    finally:
        if own:
            reader.close()


def _fetch_into(reader: RemoteReader, urls: Sequence[str], idx: range, plans: list[list[tuple[int, int]]],
                pieces: list[dict[int, bytes]], sizes: np.ndarray, etags: list[str | None]) -> None:
    """Fetch every planned range of the objects ``idx`` in one concurrent call into ``pieces``."""
    r_urls, r_starts, r_lengths, owner, r_etags, r_sizes = [], [], [], [], [], []
    for k, (i, plan) in enumerate(zip(idx, plans)):
        for start, length in plan:
            r_urls.append(urls[i])
            r_starts.append(start)
            r_lengths.append(length)
            owner.append(k)
            r_etags.append(etags[i])
            r_sizes.append(int(sizes[i]))
    if not r_urls:
        return
    lengths = np.asarray(r_lengths, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    buf = np.empty(int(offsets[-1]), dtype=np.uint8)
    reader.read_ranges(r_urls, np.asarray(r_starts, dtype=np.int64), lengths, buf, offsets[:-1],
                       expected_etags=r_etags, expected_sizes=np.asarray(r_sizes, dtype=np.int64))
    for j, k in enumerate(owner):
        pieces[k][r_starts[j]] = buf[offsets[j]:offsets[j + 1]].tobytes()


def describer(reader: RemoteReader, urls: Sequence[str], sizes: np.ndarray | Sequence[int],
              etags: Sequence[str | None]) -> Describer:
    """The ``describe(paths, kinds=, verbose=, chunk=)`` that :meth:`Catalog.sync` calls in place
    of local libmagic for these objects: their sizes and ETags (from a listing) spare one ``info`` per object."""
    facts = {u: (s, e) for u, s, e in zip(urls, np.asarray(sizes).tolist(), etags)}

    def describe(paths: Sequence[str], *, kinds: Sequence[str], verbose: bool = False,
                 chunk: int = _CHUNK) -> Iterator[tuple[str | None, str | None]]:
        todo = list(paths)
        return iter_describe_prefixes(todo, [facts[u][0] for u in todo], [facts[u][1] for u in todo],
                                      reader.storage_options, kinds=kinds, reader=reader, chunk=chunk)

    return describe
