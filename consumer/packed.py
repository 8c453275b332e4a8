"""Packed token stores: every document of a corpus written once, then served from memory maps.

A packed store at ``prefix`` (for example ``/data/run1/corpus``) is three or four files side by side::

    prefix.bin + prefix.idx   format "megatron": Megatron-LM MMIDIDX (consumer.formats.mmidx), Megatron
                              flavour, one sequence per document (document_indices == 0..D), token dtype
                              optimal_dtype(vocab.size): uint16 when the vocabulary has < 65500 ids
                              (n_bytes=1), else int32 (n_bytes=2 has 65542 ids, n_bytes=3 16777222).
    prefix.pbin               format "modalities": Modalities .pbin (consumer.formats.pbin), one index
                              entry per document, unsigned little-endian tokens of width 2 when
                              vocab.size <= 65536, else 4.
    prefix.consumer.npz       the file table, in store order (np.savez_compressed, no pickled objects):
                                paths       uint8[...]  every source path, os.fsencode'd, joined by NUL
                                doc_class   int32[D]    index into the sidecar's "classes"
                                doc_size    int64[D]    source file size in bytes
                                doc_header  int32[D]    index into the sidecar's "headers"
    prefix.consumer.json      the sidecar (UTF-8 JSON object), written last:
                                format            "consumer-packed"
                                format_version    1
                                consumer_version  package version that wrote it
                                store             "megatron" | "modalities"
                                dtype             token dtype of the store ("uint16", "int32", "uint32")
                                n_bytes           bytes per data token (1, 2, 3)
                                vocab_size        Vocab(n_bytes).size
                                metadata          header mode at pack time: "file", "mime", null, "callable"
                                with_header       documents carry [header] SEP (false iff metadata is null)
                                max_header_bytes  the header cap in force when packing
                                headers           the distinct normalised header texts, sorted ([""] without)
                                classes           class names, sorted
                                class_to_id       {class: id} of the packing dataset
                                documents         D, the number of documents (= source files)
                                tokens            total tokens in the store
                                files             {"bin"|"idx"|"pbin"|"table": {"name": file name when
                                                  written (informational: a store may be renamed as a
                                                  whole), "size": exact bytes (checked at open)}}

Document ``i`` of the store holds exactly the tokens ``Consumer.document_tokens`` gives for its file:
``[header tokens] SEP [content tokens] EOF`` (``[content] EOF`` without headers). Documents are stored
in corpus order (class name, then path) by :func:`pack`; a merged store (:func:`merge_packed`) holds
its inputs one after the other, and :func:`open_packed` sorts the file table back into corpus order
(the tokens stay where they are: ``doc_ptr`` points at each document).

Writes are atomic: every file is written under a temporary hidden name (``.name.<hex>.tmp...``) in
the target directory and fsynced; then an older sidecar at ``prefix`` is removed, the data files and
the table are renamed into place, and the sidecar is renamed last. A pack killed part-way leaves only
hidden temporary files; :func:`open_packed` refuses a prefix without sidecar ("incomplete pack") and a
store whose files differ in size from what the sidecar recorded (expected vs actual in the message).
Token values are not scanned at open (that would read the whole store); sizes, dtypes, document counts
and every document's length are checked.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from . import __version__
from .documents import DocumentTable
from .errors import FormatError, InputError, short_repr
from .fileio import atomic_write_bytes, fsync_dir, stat_regular, temp_path
from .filemeta import MAX_HEADER_BYTES
from .formats.mmidx import IndexedReader, IndexedWriter, merge, optimal_dtype
from .formats.pbin import read_pbin, write_pbin
from .ir import ClassFiles, Corpus
from .progress import progress_bar
from .reader import read_segments
from .vocab import VALID_N_BYTES, Vocab, decode_ids, encode_bytes

__all__ = ["FORMATS", "PackedTokens", "pack", "open_packed", "merge_packed", "inspect_packed", "read_sidecar",
           "store_dtype"]

FORMAT_NAME = "consumer-packed"
FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".consumer.json"
TABLE_SUFFIX = ".consumer.npz"
DEFAULT_CHUNK_TOKENS = 1 << 22  # ~4M tokens (32 MB of int64) per read_segments call while packing

# store format -> the files it is made of (sidecar "files" key -> suffix after the prefix)
FORMATS: dict[str, dict[str, str]] = {
    "megatron": {"bin": ".bin", "idx": ".idx"},
    "modalities": {"pbin": ".pbin"},
}
_TABLE_KEYS = ("paths", "doc_class", "doc_size", "doc_header")
_METADATA_VALUES = ("file", "mime", None, "callable")


@dataclass(frozen=True, eq=False)
class PackedTokens:
    """The token source the reader uses for a packed store (``DocumentTable.packed``).

    ``tokens`` is the whole store as one read-only 1-D memory-mapped array in the store's dtype;
    ``doc_ptr[i]`` (int64) is the position in ``tokens`` of the first token of document ``i`` of the
    ``DocumentTable`` (corpus order). ``store`` and ``prefix`` say where it came from.
    """

    tokens: np.ndarray
    doc_ptr: np.ndarray
    store: str
    prefix: str


def store_dtype(fmt: str, vocab_size: int) -> np.dtype:
    """Little-endian token dtype of a ``fmt`` store for a vocabulary of ``vocab_size`` ids.

    ``"megatron"``: Megatron's ``optimal_dtype`` (uint16 below 65500 ids, else int32);
    ``"modalities"``: uint16 up to 65536 ids, else uint32 (``.pbin`` widths 2 and 4).
    """
    if fmt == "megatron":
        return optimal_dtype(int(vocab_size)).newbyteorder("<")
    if fmt == "modalities":
        return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")
    raise InputError(f"format must be one of {sorted(FORMATS)}, got {short_repr(fmt)}")


# ------------------------------------------------------------------------------------------ paths


def _prefix(prefix: Any, what: str = "prefix", create: bool = False) -> Path:
    """``prefix`` as a Path whose directory exists (created when ``create``; InputError otherwise)."""
    if isinstance(prefix, bytes) or not isinstance(prefix, (str, os.PathLike)):
        raise InputError(f"{what} must be a path (str or os.PathLike), got {short_repr(prefix)}")
    text = os.fspath(prefix)
    if not text or text.endswith(os.sep) or os.path.basename(text) in ("", ".", ".."):
        raise InputError(f"{what} must name files (directory + base name), got {short_repr(text)}")
    path = Path(os.path.abspath(text))
    if create and not path.parent.exists():
        path.parent.mkdir(parents=True)
    if not path.parent.is_dir():
        raise InputError(f"{what}: directory does not exist: {str(path.parent)!r}")
    return path


def _with_suffix(prefix: Path, suffix: str) -> Path:
    return prefix.parent / (prefix.name + suffix)


def _metadata_mode(metadata: Any) -> str | None:
    """The sidecar's metadata value: the mode name, None, or ``"callable"``."""
    if metadata is None or isinstance(metadata, str):
        return metadata
    return "callable"


# ------------------------------------------------------------------------------------------ writing


def _chunks(doc_len: np.ndarray, chunk_tokens: int) -> list[tuple[int, int]]:
    """Consecutive document ranges ``[s, e)`` of at most ``chunk_tokens`` tokens (one document if longer)."""
    ends = np.cumsum(doc_len)
    out, s, n = [], 0, doc_len.size
    while s < n:
        base = int(ends[s - 1]) if s else 0
        e = max(int(np.searchsorted(ends, base + chunk_tokens, side="right")), s + 1)
        out.append((s, e))
        s = e
    return out


def _document_chunks(docs: DocumentTable, dtype: np.dtype, chunk_tokens: int, bar):
    """Yield ``(tokens, local_ptr)`` per chunk: the chunk's documents back to back in ``dtype``,
    read with one :func:`read_segments` call per chunk, and each document's start in it (+ end)."""
    doc_len = docs.doc_len
    for s, e in _chunks(doc_len, chunk_tokens):
        lens = doc_len[s:e]
        ptr = np.zeros(lens.size + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        zeros = np.zeros(lens.size, dtype=np.int64)
        rows, _ = read_segments(docs, (1, int(ptr[-1])), zeros, ptr[:-1], np.arange(s, e, dtype=np.int64),
                                zeros, lens)
        tokens = rows[0].astype(dtype)
        yield tokens, ptr
        bar.update(tokens.nbytes)


def _write_megatron(docs: DocumentTable, tmp: Path, dtype: np.dtype, chunk_tokens: int, bar) -> None:
    with IndexedWriter(str(tmp), dtype) as writer:
        for tokens, ptr in _document_chunks(docs, dtype, chunk_tokens, bar):
            for lo, hi in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
                writer.add_document(tokens[lo:hi])


def _write_modalities(docs: DocumentTable, tmp: Path, dtype: np.dtype, chunk_tokens: int, bar) -> None:
    def documents():
        for tokens, ptr in _document_chunks(docs, dtype, chunk_tokens, bar):
            for lo, hi in zip(ptr[:-1].tolist(), ptr[1:].tolist()):
                yield tokens[lo:hi]

    write_pbin(_with_suffix(tmp, ".pbin"), documents(), dtype.itemsize)


def _write_table(path: Path, paths: Sequence[str], doc_class, doc_size, doc_header) -> None:
    """The file table as a compressed ``.npz`` at ``path`` (created exclusively, fsynced)."""
    blob = np.frombuffer(os.fsencode("\0".join(paths)), dtype=np.uint8)
    with open(path, "xb") as f:
        np.savez_compressed(f, paths=blob, doc_class=np.asarray(doc_class, dtype=np.int32),
                            doc_size=np.asarray(doc_size, dtype=np.int64),
                            doc_header=np.asarray(doc_header, dtype=np.int32))
        f.flush()
        os.fsync(f.fileno())


def _commit(tmp: Path, prefix: Path, fmt: str, sidecar: dict) -> dict[str, dict]:
    """Rename the temporary store files into place, then write the sidecar (last); returns its ``files``."""
    kinds = dict(FORMATS[fmt], table=TABLE_SUFFIX)
    files = {}
    for kind, suffix in kinds.items():
        files[kind] = {"name": prefix.name + suffix, "size": os.stat(_with_suffix(tmp, suffix)).st_size}
    sidecar = dict(sidecar, files=files)
    text = json.dumps(sidecar, indent=1, sort_keys=False).encode("utf-8")
    _with_suffix(prefix, SIDECAR_SUFFIX).unlink(missing_ok=True)  # an old sidecar never describes new data
    fsync_dir(prefix.parent)
    for suffix in kinds.values():
        os.replace(_with_suffix(tmp, suffix), _with_suffix(prefix, suffix))
    fsync_dir(prefix.parent)
    atomic_write_bytes(_with_suffix(prefix, SIDECAR_SUFFIX), text)
    return files


def _cleanup(tmp: Path) -> None:
    for suffix in (".bin", ".idx", ".pbin", TABLE_SUFFIX):
        _with_suffix(tmp, suffix).unlink(missing_ok=True)


def _summary(prefix: Path, fmt: str, dtype: np.dtype, files: dict, documents: int, tokens: int,
             source_bytes: int, seconds: float) -> dict:
    return {
        "prefix": str(prefix),
        "format": fmt,
        "dtype": dtype.name,
        "documents": int(documents),
        "tokens": int(tokens),
        "source_bytes": int(source_bytes),
        "bytes": int(sum(f["size"] for f in files.values())),
        "files": {kind: str(prefix.parent / f["name"]) for kind, f in files.items()}
        | {"sidecar": str(_with_suffix(prefix, SIDECAR_SUFFIX))},
        "seconds": seconds,
    }


def pack(ds, prefix, format: str = "megatron", verbose: bool = False, *,
         chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> dict:
    """Write every document of the dataset ``ds`` (a ``Consumer``) to a packed store at ``prefix``.

    One document per source file, in corpus order (``ds.documents`` order), with exactly the tokens
    the raw reader produces. ``format="megatron"`` writes ``prefix.bin/.idx`` (Megatron-LM's
    ``IndexedDataset`` layout), ``"modalities"`` writes ``prefix.pbin``; both add
    ``prefix.consumer.npz`` (file table) and ``prefix.consumer.json`` (sidecar); see the module
    docstring. Tokens are read in chunks of about ``chunk_tokens`` tokens (many documents per
    :func:`~consumer.reader.read_segments` call). Atomic: a pack that fails or is killed while writing
    leaves the final names untouched (a previous store there stays valid; a kill leaves only hidden
    ``.tmp`` files). Only a failure during the final renames (microseconds) can leave a mix of old and
    new files, which :func:`open_packed` refuses by their recorded sizes or the missing sidecar.
    ``verbose`` reports the packed size and shows a progress bar (bytes); otherwise
    nothing is printed. Returns a summary: prefix, format, dtype, documents, tokens, source and store
    bytes, the files written and the wall time.
    """
    if format not in FORMATS:
        raise InputError(f"format must be one of {sorted(FORMATS)}, got {short_repr(format)}")
    if not isinstance(verbose, bool):
        raise InputError(f"verbose must be a bool, got {short_repr(verbose)}")
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, (int, np.integer)) or chunk_tokens < 1:
        raise InputError(f"chunk_tokens must be an int >= 1, got {short_repr(chunk_tokens)}")
    docs: DocumentTable = ds.documents
    if len(docs) == 0:
        raise InputError("ds: the dataset has no documents to pack")
    final = _prefix(prefix, create=True)
    vocab = docs.vocab
    dtype = store_dtype(format, vocab.size)
    tokens = int(docs.doc_len.sum())
    packed_bytes = tokens * dtype.itemsize
    t0 = time.perf_counter()
    bar = progress_bar(packed_bytes, verbose, f"pack {final.name} ({format}, {dtype.name})", unit="B",
                       announce=f"consumer pack: {len(docs)} documents, {tokens} tokens -> {packed_bytes} bytes "
                                f"of {dtype.name} tokens ({format}) at {final}")
    tmp = temp_path(final)
    try:
        if format == "megatron":
            _write_megatron(docs, tmp, dtype, int(chunk_tokens), bar)
        else:
            _write_modalities(docs, tmp, dtype, int(chunk_tokens), bar)
        _write_table(_with_suffix(tmp, TABLE_SUFFIX), docs.paths, docs.doc_class, docs.doc_size, docs.doc_header)
        sidecar = _sidecar(format, dtype, vocab, _metadata_mode(ds.metadata), docs.with_header,
                           MAX_HEADER_BYTES, docs.headers, list(ds.classes), dict(ds.class_to_id), len(docs), tokens)
        files = _commit(tmp, final, format, sidecar)
    except BaseException:
        _cleanup(tmp)
        raise
    finally:
        bar.close()
    return _summary(final, format, dtype, files, len(docs), tokens, int(docs.doc_size.sum()),
                    time.perf_counter() - t0)


def _sidecar(fmt: str, dtype: np.dtype, vocab: Vocab, metadata: str | None, with_header: bool,
             max_header_bytes: int, headers: list[str], classes: list[str], class_to_id: dict[str, int],
             documents: int, tokens: int) -> dict:
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "consumer_version": __version__,
        "store": fmt,
        "dtype": dtype.name,
        "n_bytes": vocab.n_bytes,
        "vocab_size": vocab.size,
        "metadata": metadata,
        "with_header": bool(with_header),
        "max_header_bytes": int(max_header_bytes),
        "headers": list(headers),
        "classes": list(classes),
        "class_to_id": {str(c): int(i) for c, i in class_to_id.items()},
        "documents": int(documents),
        "tokens": int(tokens),
    }


# ------------------------------------------------------------------------------------------ reading


@dataclass(eq=False)
class _Store:
    """A validated store, arrays in store order."""

    prefix: Path
    sidecar: dict
    fmt: str
    vocab: Vocab
    paths: list[str]
    doc_class: np.ndarray   # int64 [D]
    doc_size: np.ndarray    # int64 [D]
    doc_header: np.ndarray  # int64 [D]
    lengths: np.ndarray     # int64 [D] tokens per document, from the store's own index
    starts: np.ndarray      # int64 [D] first token of each document in ``tokens``
    tokens: np.ndarray


def _field(side: dict, key: str, types: tuple, where: Path):
    if key not in side:
        raise FormatError(f"{where}: sidecar field {key!r}: expected it to be present, got nothing")
    value = side[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = "/".join(t.__name__ for t in types)
        raise FormatError(f"{where}: sidecar field {key!r}: expected {names}, got {short_repr(value)}")
    return value


def _read_sidecar(prefix: Path) -> dict:
    """Parse and check the sidecar's fields (not yet the store files)."""
    path = _with_suffix(prefix, SIDECAR_SUFFIX)
    if not path.exists():
        present = [str(_with_suffix(prefix, s)) for s in (".bin", ".idx", ".pbin", TABLE_SUFFIX)
                   if _with_suffix(prefix, s).exists()]
        if present:
            raise FormatError(f"incomplete pack at prefix {str(prefix)!r}: sidecar {str(path)!r} is missing "
                              f"(it is written last) but store files exist: {present}")
        temps = sorted(n for n in os.listdir(prefix.parent) if n.startswith(f".{prefix.name}.") and ".tmp" in n)
        hint = f"; temporary files of an interrupted pack exist: {temps[:4]}" if temps else ""
        raise InputError(f"prefix: no packed store at {str(prefix)!r}: expected {str(path)!r}, not found{hint}")
    stat_regular(path, "prefix (sidecar)")
    try:
        side = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: sidecar: expected a JSON object, got unparsable text ({e})") from None
    if not isinstance(side, dict):
        raise FormatError(f"{path}: sidecar: expected a JSON object, got {type(side).__name__}")
    name = side.get("format")
    if name != FORMAT_NAME:
        raise FormatError(f"{path}: sidecar field 'format': expected {FORMAT_NAME!r}, got {short_repr(name)}")
    version = side.get("format_version")
    if version != FORMAT_VERSION:
        raise FormatError(f"{path}: sidecar field 'format_version': expected {FORMAT_VERSION}, "
                          f"got {short_repr(version)}")
    fmt = _field(side, "store", (str,), path)
    if fmt not in FORMATS:
        raise FormatError(f"{path}: sidecar field 'store': expected one of {sorted(FORMATS)}, got {fmt!r}")
    n_bytes = _field(side, "n_bytes", (int,), path)
    if n_bytes not in VALID_N_BYTES:
        raise FormatError(f"{path}: sidecar field 'n_bytes': expected one of {VALID_N_BYTES}, got {n_bytes}")
    vocab = Vocab(n_bytes)
    if _field(side, "vocab_size", (int,), path) != vocab.size:
        raise FormatError(f"{path}: sidecar field 'vocab_size': expected {vocab.size} for n_bytes={n_bytes}, "
                          f"got {side['vocab_size']}")
    dtype = store_dtype(fmt, vocab.size)
    if _field(side, "dtype", (str,), path) != dtype.name:
        raise FormatError(f"{path}: sidecar field 'dtype': expected {dtype.name!r} for a {fmt} store of "
                          f"n_bytes={n_bytes}, got {side['dtype']!r}")
    if side.get("metadata", 0) not in _METADATA_VALUES:
        raise FormatError(f"{path}: sidecar field 'metadata': expected one of {list(_METADATA_VALUES)}, "
                          f"got {short_repr(side.get('metadata', '<missing>'))}")
    with_header = _field(side, "with_header", (bool,), path)
    if with_header != (side["metadata"] is not None):
        raise FormatError(f"{path}: sidecar field 'with_header': expected {side['metadata'] is not None} "
                          f"for metadata={side['metadata']!r}, got {with_header}")
    _field(side, "max_header_bytes", (int,), path)
    headers = _field(side, "headers", (list,), path)
    if not headers or not all(isinstance(h, str) for h in headers) or (not with_header and headers != [""]):
        raise FormatError(f"{path}: sidecar field 'headers': expected a non-empty list of str ([''] without "
                          f"headers), got {short_repr(headers)}")
    classes = _field(side, "classes", (list,), path)
    if not classes or not all(isinstance(c, str) and c for c in classes) or classes != sorted(set(classes)):
        raise FormatError(f"{path}: sidecar field 'classes': expected sorted unique non-empty class names, "
                          f"got {short_repr(classes)}")
    _field(side, "class_to_id", (dict,), path)
    if _field(side, "documents", (int,), path) < 1:
        raise FormatError(f"{path}: sidecar field 'documents': expected >= 1, got {side['documents']}")
    _field(side, "tokens", (int,), path)
    files = _field(side, "files", (dict,), path)
    wanted = set(FORMATS[fmt]) | {"table"}
    if set(files) != wanted:
        raise FormatError(f"{path}: sidecar field 'files': expected entries {sorted(wanted)} for a {fmt} store, "
                          f"got {sorted(files)}")
    for kind, entry in files.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("size"), int)
        if not ok or os.path.basename(entry["name"]) != entry["name"] or entry["name"] in ("", ".", ".."):
            raise FormatError(f"{path}: sidecar files[{kind!r}]: expected {{'name': file name, 'size': int}}, "
                              f"got {short_repr(entry)}")
    return side


def _check_file_sizes(prefix: Path, side: dict) -> dict[str, Path]:
    """Every store file exists at ``prefix`` + its suffix with the exact size the sidecar recorded.

    The recorded names are informational (a store may be renamed as a whole); sizes must match.
    """
    out = {}
    for kind, suffix in dict(FORMATS[side["store"]], table=TABLE_SUFFIX).items():
        expected = side["files"][kind]["size"]
        path = _with_suffix(prefix, suffix)
        if not path.exists():
            raise FormatError(f"incomplete pack at prefix {str(prefix)!r}: store file {str(path)!r} is missing: "
                              f"expected {expected} bytes (recorded in the sidecar), got no file")
        size = stat_regular(path, f"prefix ({kind} file)").st_size
        if size != expected:
            what = "truncated" if size < expected else "inconsistent"
            raise FormatError(f"{path}: {what} store file: size expected {expected} bytes "
                              f"(recorded in the sidecar), got {size}")
        out[kind] = path
    return out


def _load_table(path: Path, side: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The file table (store order): paths, class index, size, header index, all checked."""
    n = side["documents"]
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in _TABLE_KEYS if k not in z.files]
            if missing:
                raise FormatError(f"{path}: file table: expected arrays {list(_TABLE_KEYS)}, missing {missing}")
            arrays = {k: z[k] for k in _TABLE_KEYS}
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001  (zlib/zipfile/numpy raise many types on damaged bytes)
        raise FormatError(f"{path}: file table: expected an .npz of plain arrays, got an unreadable file "
                          f"({type(e).__name__}: {e})") from None
    for key in _TABLE_KEYS[1:]:
        arr = arrays[key]
        if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
            raise FormatError(f"{path}: file table {key!r}: expected {n} integers (sidecar 'documents'), got "
                              f"shape {arr.shape} of {arr.dtype}")
    blob = arrays["paths"]
    if blob.ndim != 1 or blob.dtype != np.uint8:
        raise FormatError(f"{path}: file table 'paths': expected a 1-D uint8 array, got {blob.shape} of {blob.dtype}")
    paths = os.fsdecode(blob.tobytes()).split("\0")
    if len(paths) != n or any(not p for p in paths):
        raise FormatError(f"{path}: file table 'paths': expected {n} non-empty paths (sidecar 'documents'), "
                          f"got {len(paths)}")
    doc_class = arrays["doc_class"].astype(np.int64)
    doc_size = arrays["doc_size"].astype(np.int64)
    doc_header = arrays["doc_header"].astype(np.int64)
    for key, arr, hi in (("doc_class", doc_class, len(side["classes"])), ("doc_header", doc_header,
                                                                          len(side["headers"]))):
        bad = (arr < 0) | (arr >= hi)
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(f"{path}: file table {key}[{i}] ({paths[i]!r}): expected an index in [0, {hi}), "
                              f"got {int(arr[i])}")
    if (doc_size < 0).any():
        i = int(np.argmax(doc_size < 0))
        raise FormatError(f"{path}: file table doc_size[{i}] ({paths[i]!r}): expected >= 0, got {int(doc_size[i])}")
    return paths, doc_class, doc_size, doc_header


def _open_tokens(prefix: Path, fmt: str, files: dict[str, Path], side: dict):
    """(tokens, starts, lengths) of the store in store order, after the format reader's own checks."""
    dtype = np.dtype(store_dtype(fmt, side["vocab_size"]))
    n = side["documents"]
    if fmt == "megatron":
        reader = IndexedReader(str(prefix))
        if reader.flavour != "megatron":
            raise FormatError(f"{files['idx']}: expected a megatron-flavoured .idx, got {reader.flavour}")
        if reader.dtype != dtype:
            raise FormatError(f"{files['idx']}: token dtype expected {dtype.name} (n_bytes={side['n_bytes']}), "
                              f"got {reader.dtype.name}")
        if len(reader) != n:
            raise FormatError(f"{files['idx']}: document count expected {n} (sidecar 'documents'), got "
                              f"{len(reader)} sequences")
        doc_idx = reader.document_indices
        if doc_idx.shape[0] != n + 1 or not np.array_equal(doc_idx, np.arange(n + 1)):
            raise FormatError(f"{files['idx']}: document_indices: expected 0..{n} (one sequence per document), "
                              f"got {short_repr(doc_idx[:8].tolist())} ({doc_idx.shape[0]} entries)")
        return reader.tokens, reader.pointers // dtype.itemsize, reader.lengths.astype(np.int64)
    pb = read_pbin(files["pbin"])
    if pb.token_size_in_bytes != dtype.itemsize:
        raise FormatError(f"{files['pbin']}: token width expected {dtype.itemsize} (n_bytes={side['n_bytes']}), "
                          f"got {pb.token_size_in_bytes}")
    if len(pb) != n:
        raise FormatError(f"{files['pbin']}: document count expected {n} (sidecar 'documents'), got {len(pb)}")
    width = pb.token_size_in_bytes
    # a plain ndarray view of the np.memmap: slicing a memmap subclass costs ~1 us more per slice
    return pb.data.view(np.ndarray), pb.index[:, 0] // width, pb.index[:, 1] // width


def _load_store(prefix: Any) -> _Store:
    path = _prefix(prefix)
    side = _read_sidecar(path)
    files = _check_file_sizes(path, side)
    fmt = side["store"]
    tokens, starts, lengths = _open_tokens(path, fmt, files, side)
    if int(lengths.sum()) != side["tokens"]:
        raise FormatError(f"{path}: token count expected {side['tokens']} (sidecar 'tokens'), got "
                          f"{int(lengths.sum())} in the store")
    paths, doc_class, doc_size, doc_header = _load_table(files["table"], side)
    return _Store(path, side, fmt, Vocab(side["n_bytes"]), paths, doc_class, doc_size, doc_header,
                  lengths, np.asarray(starts, dtype=np.int64), tokens)


def _corpus_order(paths: list[str], doc_class: np.ndarray, classes: list[str], where: Path) -> np.ndarray:
    """Permutation putting store documents into corpus order (class, then path); checks for duplicates."""
    order = np.argsort(doc_class, kind="stable")
    bounds = np.searchsorted(doc_class[order], np.arange(len(classes) + 1))
    for c in range(len(classes)):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        if lo == hi:
            raise FormatError(f"{where}: class {classes[c]!r}: expected at least one document, got none")
        part = order[lo:hi]
        sub = [paths[i] for i in part.tolist()]
        perm = sorted(range(len(sub)), key=sub.__getitem__)  # O(n) on sorted runs (timsort)
        order[lo:hi] = part[perm]
    if len(set(paths)) != len(paths):
        seen: set[str] = set()
        dup = next(p for p in paths if p in seen or seen.add(p))
        raise FormatError(f"{where}: file table: expected each path once, got {dup!r} more than once")
    return order


def _header_tokens(headers: list[str], vocab: Vocab, with_header: bool) -> tuple[np.ndarray, np.ndarray]:
    toks = [encode_bytes(h.encode("utf-8"), vocab) for h in headers] if with_header else [np.zeros(0, np.int64)]
    ptr = np.zeros(len(toks) + 1, dtype=np.int64)
    np.cumsum([t.size for t in toks], out=ptr[1:])
    return ptr, np.concatenate(toks).astype(np.int64)


def _open(prefix: Any) -> tuple[_Store, Corpus, DocumentTable]:
    store = _load_store(prefix)
    side = store.sidecar
    classes: list[str] = side["classes"]
    order = _corpus_order(store.paths, store.doc_class, classes, store.prefix)
    paths = [store.paths[i] for i in order.tolist()]
    doc_class = store.doc_class[order]
    header_ptr, header_tok = _header_tokens(side["headers"], store.vocab, side["with_header"])
    docs = DocumentTable(
        vocab=store.vocab, paths=paths, doc_class=doc_class, doc_size=store.doc_size[order],
        doc_header=store.doc_header[order], headers=list(side["headers"]), header_ptr=header_ptr,
        header_tok=header_tok, with_header=side["with_header"],
        packed=PackedTokens(tokens=store.tokens, doc_ptr=store.starts[order], store=store.fmt,
                            prefix=str(store.prefix)))
    actual = store.lengths[order]
    bad = docs.doc_len != actual
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(
            f"{store.prefix}: document {int(order[i])} of the store ({paths[i]!r}): length expected "
            f"{int(docs.doc_len[i])} tokens (from its size {int(docs.doc_size[i])} bytes and header), got "
            f"{int(actual[i])} in the store")
    bounds = np.searchsorted(doc_class, np.arange(len(classes) + 1))
    corpus = Corpus(classes=tuple(ClassFiles(name=c, paths=tuple(paths[int(bounds[k]):int(bounds[k + 1])]))
                                  for k, c in enumerate(classes)), form="packed")
    return store, corpus, docs


def open_packed(prefix) -> tuple[Corpus, DocumentTable, str | None]:
    """Open and validate the packed store at ``prefix``: ``(corpus, documents, metadata)``.

    The format (``.bin/.idx`` or ``.pbin``) is the one the sidecar names, and its files must be present
    with the exact sizes it recorded. Checked: sidecar fields, dtype, document count, one sequence per
    document, the file table, and every document's length against the ``DocumentTable``'s ``doc_len``
    (FormatError naming the first bad document, expected vs actual). ``corpus`` and ``documents`` are
    in corpus order (classes by name, paths sorted) whatever the store order (merged stores), and
    ``documents.packed`` holds zero-copy memory-mapped tokens (:class:`PackedTokens`). ``metadata`` is
    the header mode recorded at pack time (``"file"``, ``"mime"``, ``None`` or ``"callable"``).
    Source files are never opened. InputError if there is no store at ``prefix`` at all.
    """
    store, corpus, docs = _open(prefix)
    return corpus, docs, store.sidecar["metadata"]


def read_sidecar(prefix) -> dict:
    """The checked sidecar of the store at ``prefix`` (a dict, see the module docstring), without
    opening the store itself: e.g. ``read_sidecar(p)["class_to_id"]`` to reuse the packing run's ids.
    Raises like :func:`open_packed` for a missing or malformed sidecar."""
    return _read_sidecar(_prefix(prefix))


# ------------------------------------------------------------------------------------------ merging


def _same(stores: list[_Store], key: str) -> None:
    first = stores[0]
    for other in stores[1:]:
        if other.sidecar[key] != first.sidecar[key]:
            raise InputError(
                f"prefixes: every store must have the same {key}: {str(first.prefix)!r} has "
                f"{first.sidecar[key]!r}, {str(other.prefix)!r} has {other.sidecar[key]!r}")


def _merged_class_to_id(stores: list[_Store], classes: list[str]) -> dict[str, int]:
    """Union of the inputs' ``class_to_id`` when consistent, else the default 0..C-1 by name."""
    out: dict[str, int] = {}
    for s in stores:
        for c, i in s.sidecar["class_to_id"].items():
            if c in classes and out.setdefault(c, i) != i:
                return {c: k for k, c in enumerate(classes)}
    if set(out) != set(classes) or len(set(out.values())) != len(out):
        return {c: k for k, c in enumerate(classes)}
    return {c: out[c] for c in classes}


def merge_packed(prefixes: Sequence, out_prefix) -> dict:
    """Combine Megatron packed stores (e.g. made on different machines) into one store at ``out_prefix``.

    All inputs are fully validated first and must share ``n_bytes``, the metadata mode and the
    header cap (InputError naming both values otherwise). ``.bin/.idx`` are concatenated with
    :func:`consumer.formats.mmidx.merge` (a byte copy); header texts and classes are unioned and
    re-numbered; file tables are concatenated (a path present in two stores is an InputError naming
    it). ``.pbin`` stores are refused (InputError): convert them by opening and re-packing.
    :func:`open_packed` sorts the merged table back into corpus order. Returns a summary like
    :func:`pack` (plus ``inputs``).
    """
    if isinstance(prefixes, (str, bytes, os.PathLike)) or not isinstance(prefixes, Sequence) or not prefixes:
        raise InputError(f"prefixes must be a non-empty list of store prefixes, got {short_repr(prefixes)}")
    final = _prefix(out_prefix, "out_prefix", create=True)
    t0 = time.perf_counter()
    stores = [_load_store(p) for p in prefixes]
    for s in stores:
        if s.fmt != "megatron":
            raise InputError(f"prefixes: merge_packed supports megatron stores only, {str(s.prefix)!r} is a "
                             f"{s.fmt!r} store (open it with Consumer.from_packed and pack it as megatron)")
        if s.prefix == final:
            raise InputError(f"out_prefix {str(final)!r} is also an input; write the merge to a new prefix")
    seen_inputs: dict[Path, int] = {}
    for k, s in enumerate(stores):
        if s.prefix in seen_inputs:
            raise InputError(f"prefixes: {str(s.prefix)!r} given twice (positions {seen_inputs[s.prefix]} and {k})")
        seen_inputs[s.prefix] = k
    for key in ("n_bytes", "metadata", "max_header_bytes"):
        _same(stores, key)
    first = stores[0].sidecar
    with_header = first["with_header"]
    headers = sorted({h for s in stores for h in s.sidecar["headers"]}) if with_header else [""]
    classes = sorted({c for s in stores for c in s.sidecar["classes"]})
    h_lookup = {h: i for i, h in enumerate(headers)}
    c_lookup = {c: i for i, c in enumerate(classes)}
    paths: list[str] = []
    owner: dict[str, int] = {}
    parts_class, parts_size, parts_header = [], [], []
    for k, s in enumerate(stores):
        for p in s.paths:
            j = owner.setdefault(p, k)
            if j != k:
                raise InputError(f"prefixes: file {p!r} is in two stores: {str(stores[j].prefix)!r} and "
                                 f"{str(s.prefix)!r}; each file may be packed once")
        paths.extend(s.paths)
        hmap = np.array([h_lookup[h] for h in s.sidecar["headers"]], dtype=np.int64) if with_header \
            else np.zeros(1, dtype=np.int64)
        cmap = np.array([c_lookup[c] for c in s.sidecar["classes"]], dtype=np.int64)
        parts_class.append(cmap[s.doc_class])
        parts_size.append(s.doc_size)
        parts_header.append(hmap[s.doc_header])
    documents = len(paths)
    tokens = int(sum(int(s.lengths.sum()) for s in stores))
    vocab = stores[0].vocab
    dtype = store_dtype("megatron", vocab.size)
    tmp = temp_path(final)
    try:
        merge([str(s.prefix) for s in stores], str(tmp))
        _write_table(_with_suffix(tmp, TABLE_SUFFIX), paths, np.concatenate(parts_class),
                     np.concatenate(parts_size), np.concatenate(parts_header))
        sidecar = _sidecar("megatron", dtype, vocab, first["metadata"], with_header, first["max_header_bytes"],
                           headers, classes, _merged_class_to_id(stores, classes), documents, tokens)
        files = _commit(tmp, final, "megatron", sidecar)
    except BaseException:
        _cleanup(tmp)
        raise
    out = _summary(final, "megatron", dtype, files, documents, tokens,
                   int(sum(int(s.doc_size.sum()) for s in stores)), time.perf_counter() - t0)
    out["inputs"] = [str(s.prefix) for s in stores]
    return out


# ------------------------------------------------------------------------------------------ inspecting


def inspect_packed(prefix, preview_tokens: int = 64) -> dict:
    """A validated summary of the store at ``prefix``, for ``consumer inspect``.

    Keys: prefix, format, dtype, documents, tokens, n_bytes, vocab_size, metadata, with_header,
    classes (``{class: documents}``), class_to_id, files (``{kind: {name, size}}``), consumer_version
    (of the writer) and ``preview``: the first document in corpus order (path, class, header, token
    count, its first ``preview_tokens`` ids and their decoding with ``<SEP>``-style tags).
    """
    if isinstance(preview_tokens, bool) or not isinstance(preview_tokens, (int, np.integer)) or preview_tokens < 0:
        raise InputError(f"preview_tokens must be an int >= 0, got {short_repr(preview_tokens)}")
    store, corpus, docs = _open(prefix)
    side = store.sidecar
    n = min(int(docs.doc_len[0]), int(preview_tokens))
    start = int(docs.packed.doc_ptr[0])
    ids = np.asarray(docs.packed.tokens[start:start + n], dtype=np.int64)
    text = decode_ids(ids, docs.vocab, specials="tags").decode("utf-8", errors="backslashreplace")
    return {
        "prefix": str(store.prefix),
        "format": store.fmt,
        "dtype": side["dtype"],
        "documents": len(docs),
        "tokens": side["tokens"],
        "n_bytes": side["n_bytes"],
        "vocab_size": side["vocab_size"],
        "metadata": side["metadata"],
        "with_header": side["with_header"],
        "classes": {c.name: len(c.paths) for c in corpus.classes},
        "class_to_id": dict(side["class_to_id"]),
        "files": {k: dict(v) for k, v in side["files"].items()},
        "consumer_version": side.get("consumer_version"),
        "preview": {
            "path": docs.paths[0],
            "class": corpus.classes[int(docs.doc_class[0])].name,
            "header": docs.header_text(0) if docs.with_header else None,
            "tokens": int(docs.doc_len[0]),
            "ids": ids.tolist(),
            "text": text,
        },
    }
