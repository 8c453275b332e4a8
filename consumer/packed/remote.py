"""Packed stores held in object storage or on a web server: ``from_packed("s3://bucket/runs/corpus")``.

The small files of a store — the sidecar, the file table and the index (the ``.idx``, or the header
and the index pickle of a ``.pbin``) — are downloaded once into ``<cache_dir>/packed-remote-v1/<key>/``;
the token data (the ``.bin``, or the data section of the ``.pbin``) is never downloaded: it is served
by range requests (:class:`~consumer.sources.remote_tokens.RemoteTokens`).

- **Keyed by what the store is now**: ``key`` hashes the prefix URL and the ETag and size of every
  store file, from one listing at each open. A store re-packed or changed in place gets another key,
  so a copy of one version never serves another; a reopen of an unchanged store downloads nothing but
  its sidecar (one small GET).
- **Atomic and verified**: every file is fetched with its ETag checked (``If-Match`` on S3 and HTTP),
  written under a temporary name, fsynced and renamed; a manifest with each file's sha256 is written
  last, and a reopen checks the sizes and sha256 sums against it (a damaged copy is fetched again).
- **Checked like a local store**: the same sidecar, index and file table checks, errors naming the URLs.
  The token data's ETag, recorded here, is checked on every range read: a store rewritten after it was
  opened raises :class:`~consumer.errors.FileChangedError` naming the URL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConsumerError, FormatError, InputError, RemoteError, short_repr
from ..formats.chunksums import ChunkVerifier
from ..formats.mmidx import read_index
from ..formats.pbin import HEADER_SIZE, pbin_header, pbin_index
from ..sources.objects import reader_of
from ..sources.paths import PathList
from ..sources.range_reader import RemoteReader
from ..sources.remote_tokens import RemoteTokens
from ..sources.urls import stat_objects
from ..storage import Storage
from ..util.fileio import MAX_JSON_BYTES, atomic_write_bytes, ensure_directory, load_json_bounded, sha256_file
from .layout import SIDECAR_SUFFIX, megatron_index, modalities_index, parse_sidecar, store_dtype, store_suffixes
from .sums import SUMS_SUFFIX, check_entry, verifier_from_bytes, warn_unchecked
from .table import read_table

__all__ = ["MIRROR_DIR", "load_remote_store"]

MIRROR_DIR = "packed-remote-v1"
_NAME = "store"  # base name of the local copies: store.idx, store.consumer.npz, store.pbin-index
_LOCAL_SUFFIX = {"idx": ".idx", "table": ".consumer.npz", "pbin": ".pbin-index",  # what is copied, per file kind
                 "sums": SUMS_SUFFIX}


def _stat(urls: list[str], storage_options: Mapping[str, Any] | None):
    try:
        return stat_objects(urls, storage_options)
    except ConsumerError:
        raise
    except OSError as e:  # connection refused, DNS, TLS: the backends' own exceptions are OSErrors
        raise RemoteError(f"prefix: cannot list {urls[0]!r}: {type(e).__name__}: {e}") from e


def _fetch(reader: RemoteReader, url: str, etag: str | None, size: int, ranges: list[tuple[int, int]]) -> bytes:
    """The bytes of ``ranges`` ((start, length), ...) of one object, concatenated; ETag and size verified."""
    lengths = np.array([n for _, n in ranges], dtype=np.int64)
    out = np.empty(int(lengths.sum()), dtype=np.uint8)
    reader.read_ranges([url] * len(ranges), np.array([s for s, _ in ranges], dtype=np.int64), lengths, out,
                       np.cumsum(lengths) - lengths, expected_etags=[etag] * len(ranges),
                       expected_sizes=np.full(len(ranges), size))
    return out.tobytes()


@contextmanager
def _named(local: Path, url: str) -> Iterator[None]:
    """Errors of the local parsers name the remote files, not their copies."""
    try:
        yield
    except FormatError as e:
        raise FormatError(str(e).replace(str(local / _NAME), url).replace(".pbin-index", ".pbin")) from None


def _copy_is_whole(mirror: Path, kinds: Sequence[str]) -> bool:
    """The copy under ``mirror`` is complete and undamaged (its manifest's sizes and sha256 sums)."""
    manifest = mirror / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        want = load_json_bounded(manifest.read_bytes(), str(manifest))
    except FormatError:
        return False
    if not isinstance(want, dict):
        return False
    for kind in kinds:
        path = mirror / (_NAME + _LOCAL_SUFFIX[kind])
        entry = want.get(kind)
        if not isinstance(entry, dict) or not path.is_file() or path.stat().st_size != entry.get("size") \
                or sha256_file(path) != entry.get("sha256"):
            return False
    return True


def _download(mirror: Path, reader: RemoteReader, files: dict[str, tuple[str, str | None, int]]) -> None:
    """Copy the small files (the table, the ``.idx`` or the ends of the ``.pbin``) into ``mirror``, manifest last."""
    ensure_directory(mirror, "cache_dir")
    manifest = {}
    for kind in [k for k in ("table", "idx", "pbin", "sums") if k in files]:
        url, etag, size = files[kind]
        if kind == "pbin":  # its header, then the index pickle after the data section: never the tokens
            head = _fetch(reader, url, etag, size, [(0, min(HEADER_SIZE, size))])
            data_len, _ = pbin_header(url, size, head)
            data = head + _fetch(reader, url, etag, size, [(HEADER_SIZE + data_len, size - HEADER_SIZE - data_len)]) \
                if size > HEADER_SIZE + data_len else head
        else:
            data = _fetch(reader, url, etag, size, [(0, size)]) if size else b""
        atomic_write_bytes(mirror / (_NAME + _LOCAL_SUFFIX[kind]), data)
        manifest[kind] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "url": url, "etag": etag}
    atomic_write_bytes(mirror / "manifest.json", json.dumps(manifest, indent=1).encode())


def load_remote_store(prefix: str, storage: Storage) -> tuple[dict, PathList, np.ndarray, np.ndarray, np.ndarray,
                                                  RemoteTokens, np.ndarray, np.ndarray, ChunkVerifier | None]:
    """Open the store at the URL ``prefix``: ``(sidecar, paths, doc_class, doc_size, doc_header, tokens,
    starts, lengths, verifier)`` in store order, the small files copied under ``storage.cache_dir`` (see the
    module docstring), ``tokens`` read by ranges with ``storage.options`` (through a read-through block cache of
    ``storage.remote_cache`` bytes when given); ``verifier`` checks each chunk of them at its first read (its sums
    file, ``PREFIX.consumer.sums``, is copied with the small files), None with a warning for a store packed before
    chunk sums.

    InputError naming the URL when there is no store at ``prefix`` (no sidecar); FormatError naming the
    file for a missing or inconsistent store file, as for a local store.
    """
    if not isinstance(prefix, str) or prefix.endswith("/") or not prefix.rsplit("/", 1)[-1]:
        raise InputError(f"prefix must name files (a URL prefix + base name), got {short_repr(prefix)}")
    root = storage.cache_dir
    if root is None:
        raise InputError(f"cache_dir: a store in object storage ({prefix!r}) needs a local cache_dir for its index "
                         "files, got cache_dir=False")
    storage_options = storage.options
    reader = RemoteReader(storage_options)
    tokens_reader = reader if storage.remote_cache is None else reader_of(storage)
    side_url = prefix + SIDECAR_SUFFIX
    try:
        listed = _stat([side_url], storage_options)
    except InputError:
        raise InputError(f"prefix: no packed store at {prefix!r}: expected the sidecar {side_url!r}, not found "
                         "(or not readable with these credentials)") from None
    side_size, side_etag = int(listed.sizes[0]), listed.etags[0]
    if side_size > MAX_JSON_BYTES:
        raise FormatError(f"{side_url}: sidecar: expected at most {MAX_JSON_BYTES} bytes, got {side_size}")
    side_bytes = _fetch(reader, side_url, side_etag, side_size, [(0, side_size)])
    side = parse_sidecar(side_bytes, side_url)
    fmt, n = side["store"], side["documents"]
    urls = {kind: prefix + suffix for kind, suffix in store_suffixes(fmt).items()}
    sums_entry = check_entry(side, prefix)
    sizes = {kind: side["files"][kind]["size"] for kind in urls}
    if sums_entry is not None:
        urls["sums"], sizes["sums"] = prefix + SUMS_SUFFIX, sums_entry["size"]
    else:
        warn_unchecked(prefix)
    files = _store_files(prefix, urls, sizes, storage_options)
    # the sidecar's own digest is in the key: without ETags (plain HTTP servers) a re-pack with the same file
    # sizes still changes it (its tokens_sha256), so one version's index never serves another's tokens
    key = hashlib.sha256(json.dumps([prefix, side_etag, side_size, hashlib.sha256(side_bytes).hexdigest(),
                                     sorted(files.items())]).encode()).hexdigest()
    mirror = Path(root) / MIRROR_DIR / key[:40]
    small = [k for k in ("table", "idx", "pbin", "sums") if k in files]
    if not _copy_is_whole(mirror, small):
        _download(mirror, reader, files)
    dtype = store_dtype(fmt, side["vocab_size"])
    with _named(mirror, prefix):
        if fmt == "megatron":
            index = read_index(mirror / (_NAME + ".idx"))
            starts, lengths = megatron_index(urls["idx"], index, side, dtype, n)
            url, etag, size = files["bin"]
            if index.bin_size != size:
                raise FormatError(f"{url}: .bin size expected {index.bin_size} (from the .idx), got {size}")
            tokens = RemoteTokens(tokens_reader, url, etag, size, 0, dtype, size // dtype.itemsize)
        else:
            url, etag, size = files["pbin"]
            both = (mirror / (_NAME + ".pbin-index")).read_bytes()
            head, tail = both[:HEADER_SIZE], both[HEADER_SIZE:]
            data_len, width = pbin_header(url, size, head)
            starts, lengths = modalities_index(url, width, pbin_index(url, size, head, tail), side, dtype, n)
            tokens = RemoteTokens(tokens_reader, url, etag, size, HEADER_SIZE, dtype, data_len // width)
        paths, doc_class, doc_size, doc_header = read_table(mirror / (_NAME + ".consumer.npz"), side)
    verifier = None if sums_entry is None else verifier_from_bytes(
        prefix, side, (mirror / (_NAME + SUMS_SUFFIX)).read_bytes(), dtype.itemsize, tokens.size * dtype.itemsize)
    return side, paths, doc_class, doc_size, doc_header, tokens, starts, lengths, verifier


def _store_files(prefix: str, urls: dict[str, str], sizes: dict[str, int],
                 storage_options: Mapping[str, Any] | None) -> dict[str, tuple[str, Any, int]]:
    """``(url, etag, size)`` of each store file, once its size is the one the sidecar records (FormatError
    naming the file for a missing, truncated or inconsistent one)."""
    try:
        listing = _stat(list(urls.values()), storage_options)
    except InputError:
        have = {k: u for k, u in urls.items() if _exists(u, storage_options)}
        kind = next(k for k in urls if k not in have)
        raise FormatError(f"incomplete pack at prefix {prefix!r}: store file {urls[kind]!r} is missing: expected "
                          f"{sizes[kind]} bytes (recorded in the sidecar), got no object") from None
    files: dict[str, tuple[str, Any, int]] = {}
    for kind, size, etag in zip(urls, listing.sizes.tolist(), listing.etags):
        expected = sizes[kind]
        if size != expected:
            what = "truncated" if size < expected else "inconsistent"
            raise FormatError(f"{urls[kind]}: {what} store file: size expected {expected} bytes (recorded in the "
                              f"sidecar), got {size}")
        files[kind] = (urls[kind], etag, size)
    return files


def _exists(url: str, storage_options: Mapping[str, Any] | None) -> bool:
    try:
        _stat([url], storage_options)
    except InputError:
        return False
    return True
