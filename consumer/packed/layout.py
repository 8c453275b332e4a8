"""Packed token stores, the on-disk format: file layout, sidecar and file table, each read and written here.

A packed store at ``prefix`` (for example ``/data/run1/corpus``) is four or five files side by side::

    prefix.bin + prefix.idx   format "megatron": Megatron-LM MMIDIDX (consumer.formats.mmidx), Megatron
                              flavour, one sequence per document (document_indices == 0..D), token dtype
                              optimal_dtype(vocab.size): uint16 when the vocabulary has < 65500 ids
                              (n_bytes=1), else int32 (n_bytes=2 has 65542 ids, n_bytes=3 16777222).
    prefix.pbin               format "modalities": Modalities .pbin (consumer.formats.pbin), one index
                              entry per document, unsigned little-endian tokens of width 2 when
                              vocab.size <= 65536, else 4.
    prefix.consumer.npz       the file table, in store order (consumer.packed.table): an .npz of stored, 64-byte
                              aligned members that an open maps in place, no pickled objects:
                                paths       uint8[...]  every source path, os.fsencode'd, joined by NUL
                                path_at     int64[D+1]  where each path starts in paths
                                doc_class   int32[D]    index into the sidecar's "classes"
                                doc_size    int64[D]    source file size in bytes
                                doc_header  int32[D]    index into the sidecar's "headers"
                              (stores packed before 0.9: compressed, without path_at; still read)
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
                                spec              the packing dataset's settings (Spec.to_dict()),
                                                  informational (optional)
                                tokens_sha256     sha256 hex of the token data: the whole .bin, or the
                                                  data section of the .pbin (optional: stores packed
                                                  before it existed have none); checked by verify
                                files             {"bin"|"idx"|"pbin"|"table": {"name": file name when
                                                  written (informational: a store may be renamed as a
                                                  whole), "size": exact bytes (checked at open)}}
                                chunksums         the chunk sums file (optional: stores packed before it
                                                  existed have none): {"name", "size", "algorithm":
                                                  "crc32c", "chunk_bytes"} (consumer.packed.sums)
    prefix.consumer.sums      one CRC-32C per chunk of the token data (consumer.formats.chunksums), checked
                              at each chunk's first read; not in "files", so older versions still open the store

Document ``i`` of the store holds exactly the tokens ``Consumer.document_tokens`` gives for its file:
``[header tokens] SEP [content tokens] EOF`` (``[content] EOF`` without headers). Documents are stored
in the packing dataset's order (classes by name; inside a class, files by path, records in container then record
order) by :func:`pack`; a merged store (:func:`merge_packed`) holds its inputs one after the other. An open keeps
the store's own order inside each class and only groups the documents by class when they are not grouped already
(the tokens stay where they are: ``doc_ptr`` points at each document), so ``from_packed(pack(ds))`` serves
``ds``'s samples.

Writes are atomic: every file is written under a temporary hidden name (``.name.<hex>.tmp...``) in
the target directory and fsynced; then an older sidecar at ``prefix`` is removed, the data files and
the table are renamed into place, and the sidecar is renamed last. A pack killed part-way leaves only
hidden temporary files; :func:`open_packed` refuses a prefix without sidecar ("incomplete pack") and a
store whose files differ in size from what the sidecar recorded (expected vs actual in the message).
Token values are not scanned at open (that would read the whole store); sizes, dtypes, document counts
and every document's length are checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import FormatError, InputError, short_repr
from ..formats.mmidx import IndexedReader, IndexedWriter, MMIndex, optimal_dtype
from ..formats.pbin import PbinWriter, read_pbin
from ..spec import Spec
from ..tokens.vocab import VALID_N_BYTES, Vocab
from ..util.fileio import load_json_bounded, stat_regular

__all__ = ["FORMATS", "StoreFormat", "FORMAT_NAME", "FORMAT_VERSION", "SIDECAR_SUFFIX", "TABLE_SUFFIX", "store_dtype",
           "make_sidecar", "read_sidecar_file", "parse_sidecar", "check_file_sizes", "as_prefix",
           "with_suffix", "store_suffixes", "megatron_index", "modalities_index"]

FORMAT_NAME = "consumer-packed"
FORMAT_VERSION = 1
SIDECAR_SUFFIX = ".consumer.json"
TABLE_SUFFIX = ".consumer.npz"
_METADATA_VALUES = ("file", "mime", None, "callable")


# ------------------------------------------------------------------------------------------ token files


def _megatron_dtype(vocab_size: int) -> np.dtype:
    return optimal_dtype(int(vocab_size)).newbyteorder("<")


def _modalities_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")


Pieces = Iterable[tuple[np.ndarray, Any, Any]]  # (tokens, lengths, first): segments back to back, see add_segments


def _write_megatron(tmp: Path, pieces: Pieces, dtype: np.dtype) -> None:
    with IndexedWriter(str(tmp), dtype, atomic=False) as writer:
        for piece in pieces:
            writer.add_segments(*piece)
        if writer.open_document():
            writer.end_document()


def _write_modalities(tmp: Path, pieces: Pieces, dtype: np.dtype) -> None:
    with PbinWriter(with_suffix(tmp, ".pbin"), dtype.itemsize, atomic=False) as writer:
        for piece in pieces:
            writer.add_segments(*piece)


def megatron_index(where: Any, index: MMIndex, side: dict, dtype: np.dtype, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` in tokens of a store's parsed ``.idx`` (local or downloaded), after checking it
    against the sidecar: flavour, dtype, one sequence per document. FormatError naming ``where``."""
    if index.flavour != "megatron":
        raise FormatError(f"{where}: expected a megatron-flavoured .idx, got {index.flavour}")
    if index.dtype != dtype:
        raise FormatError(f"{where}: token dtype expected {dtype.name} (n_bytes={side['n_bytes']}), "
                          f"got {index.dtype.name}")
    if index.sequence_count != n:
        raise FormatError(f"{where}: document count expected {n} (sidecar 'documents'), got "
                          f"{index.sequence_count} sequences")
    doc_idx = index.document_indices
    if doc_idx.shape[0] != n + 1 or not np.array_equal(doc_idx, np.arange(n + 1)):
        raise FormatError(f"{where}: document_indices: expected 0..{n} (one sequence per document), "
                          f"got {short_repr(doc_idx[:8].tolist())} ({doc_idx.shape[0]} entries)")
    return index.pointers // dtype.itemsize, index.lengths.astype(np.int64)


def modalities_index(where: Any, width: int, index: np.ndarray, side: dict, dtype: np.dtype,
                     n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` in tokens of a ``.pbin`` index (local or downloaded), checked against the sidecar."""
    if width != dtype.itemsize:
        raise FormatError(f"{where}: token width expected {dtype.itemsize} (n_bytes={side['n_bytes']}), got {width}")
    if index.shape[0] != n:
        raise FormatError(f"{where}: document count expected {n} (sidecar 'documents'), got {index.shape[0]}")
    return index[:, 0] // width, index[:, 1] // width


def recorded_end(starts: np.ndarray, lengths: np.ndarray) -> int | None:
    """The tokens of a store whose documents' ``starts`` and ``lengths`` were recorded: where its last document
    ends (None: no document)."""
    return int(starts[-1]) + int(lengths[-1]) if starts.size else None


def _open_megatron(prefix: Path, files: dict[str, Path], side: dict, dtype: np.dtype, n: int,
                   known: tuple[np.ndarray, np.ndarray] | None = None):
    ends = None if known is None else recorded_end(*known)
    reader = IndexedReader(str(prefix), check=known is None, tokens=ends)  # recorded: no sum of the lengths
    if known is None:
        starts, lengths = megatron_index(files["idx"], reader.index, side, dtype, n)
        return reader.tokens, starts, lengths
    index = reader.index  # checked before (``known``): the header against the sidecar, nothing read per document
    if index.flavour != "megatron" or index.dtype != dtype or index.sequence_count != n or known[0].size != n:
        megatron_index(files["idx"], index, side, dtype, n)  # raises, naming what differs
        raise FormatError(f"{files['idx']}: expected {n} documents as recorded, got {known[0].size}")
    return reader.tokens, known[0], known[1]


def _open_modalities(prefix: Path, files: dict[str, Path], side: dict, dtype: np.dtype, n: int,
                     known: tuple[np.ndarray, np.ndarray] | None = None):  # its pickled index is always read
    pb = read_pbin(files["pbin"])
    starts, lengths = modalities_index(files["pbin"], pb.token_size_in_bytes, pb.index, side, dtype, n)
    # a plain ndarray view of the np.memmap: slicing a memmap subclass costs ~1 us more per slice
    return pb.data.view(np.ndarray), starts, lengths


@dataclass(frozen=True)
class StoreFormat:
    """One store format: its files (sidecar ``files`` key -> suffix), token dtype rule, writer and opener.

    ``write(tmp_prefix, pieces, dtype)`` writes the token files under a temporary prefix (the caller
    commits them); ``pieces`` yields ``(tokens, lengths, first)``: segments of ``lengths`` tokens back to back, a
    document one or more segments (``first`` True on its first), so a document longer than memory is written
    piece by piece (:func:`~consumer.packed.write.token_pieces`).
    ``open(prefix, files, sidecar, dtype, n, known)`` returns ``(tokens, starts, lengths)`` in store order
    after the format reader's own checks; ``known``, the ``(starts, lengths)`` a full check of this version of
    the store found, lets a format skip what it would read per document.
    """

    name: str
    files: dict[str, str]
    dtype: Callable[[int], np.dtype]
    write: Callable[[Path, Pieces, np.dtype], None]
    open: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]


FORMATS: dict[str, StoreFormat] = {
    "megatron": StoreFormat("megatron", {"bin": ".bin", "idx": ".idx"}, _megatron_dtype, _write_megatron,
                            _open_megatron),
    "modalities": StoreFormat("modalities", {"pbin": ".pbin"}, _modalities_dtype, _write_modalities,
                              _open_modalities),
}


def store_dtype(fmt: str, vocab_size: int) -> np.dtype:
    """Little-endian token dtype of a ``fmt`` store for a vocabulary of ``vocab_size`` ids.

    ``"megatron"``: Megatron's ``optimal_dtype`` (uint16 below 65500 ids, else int32);
    ``"modalities"``: uint16 up to 65536 ids, else uint32 (``.pbin`` widths 2 and 4).
    """
    if fmt not in FORMATS:
        raise InputError(f"format must be one of {sorted(FORMATS)}, got {short_repr(fmt)}")
    return FORMATS[fmt].dtype(vocab_size)


def store_suffixes(fmt: str) -> dict[str, str]:
    """Every file of a ``fmt`` store: sidecar ``files`` key -> suffix (the file table included)."""
    return dict(FORMATS[fmt].files, table=TABLE_SUFFIX)


# ------------------------------------------------------------------------------------------ paths


def as_prefix(prefix: Any, what: str = "prefix", create: bool = False) -> Path:
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


def with_suffix(prefix: Path, suffix: str) -> Path:
    return prefix.parent / (prefix.name + suffix)



# ------------------------------------------------------------------------------------------ sidecar


def make_sidecar(fmt: str, dtype: np.dtype, n_bytes: int, metadata: str | None, with_header: bool,
                 max_header_bytes: int, headers: list[str], classes: list[str], class_to_id: dict[str, int],
                 documents: int, tokens: int, spec: Spec | None = None) -> dict:
    """The sidecar of a store (without ``files``, which the commit adds once the sizes are known).
    ``metadata`` is the header mode's name; ``spec`` (the packing dataset's settings) is recorded for
    information when given."""
    vocab = Vocab(n_bytes)
    out = {
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
    if spec is not None:
        out["spec"] = spec.to_dict()
    return out


def _field(side: dict, key: str, types: tuple, where: Path):
    if key not in side:
        raise FormatError(f"{where}: sidecar field {key!r}: expected it to be present, got nothing")
    value = side[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = "/".join(t.__name__ for t in types)
        raise FormatError(f"{where}: sidecar field {key!r}: expected {names}, got {short_repr(value)}")
    return value


def read_sidecar_file(prefix: Path) -> dict:
    """Parse and check the sidecar's fields (not yet the store files)."""
    path = with_suffix(prefix, SIDECAR_SUFFIX)
    if not path.exists():
        present = [str(with_suffix(prefix, s)) for s in (".bin", ".idx", ".pbin", TABLE_SUFFIX)
                   if with_suffix(prefix, s).exists()]
        if present:
            raise FormatError(f"incomplete pack at prefix {str(prefix)!r}: sidecar {str(path)!r} is missing "
                              f"(it is written last) but store files exist: {present}")
        temps = sorted(n for n in os.listdir(prefix.parent) if n.startswith(f".{prefix.name}.") and ".tmp" in n)
        hint = f"; temporary files of an interrupted pack exist: {temps[:4]}" if temps else ""
        raise InputError(f"prefix: no packed store at {str(prefix)!r}: expected {str(path)!r}, not found{hint}")
    stat_regular(path, "prefix (sidecar)")
    return parse_sidecar(path.read_bytes(), path)


def parse_sidecar(data: bytes, path: Any) -> dict:
    """Parse and check a sidecar's bytes (``path``, a file or a URL, names it in errors)."""
    side = load_json_bounded(data, f"{path}: sidecar (expected a JSON object, got unparsable text)")
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
    digest = side.get("tokens_sha256")
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64
                                   and all(c in "0123456789abcdef" for c in digest)):
        raise FormatError(f"{path}: sidecar field 'tokens_sha256': expected 64 hex digits, got {short_repr(digest)}")
    files = _field(side, "files", (dict,), path)
    wanted = set(store_suffixes(fmt))
    if set(files) != wanted:
        raise FormatError(f"{path}: sidecar field 'files': expected entries {sorted(wanted)} for a {fmt} store, "
                          f"got {sorted(files)}")
    for kind, entry in files.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("size"), int)
        if not ok or os.path.basename(entry["name"]) != entry["name"] or entry["name"] in ("", ".", ".."):
            raise FormatError(f"{path}: sidecar files[{kind!r}]: expected {{'name': file name, 'size': int}}, "
                              f"got {short_repr(entry)}")
    return side


def check_file_sizes(prefix: Path, side: dict) -> dict[str, Path]:
    """Every store file exists at ``prefix`` + its suffix with the exact size the sidecar recorded.

    The recorded names are informational (a store may be renamed as a whole); sizes must match.
    """
    out = {}
    for kind, suffix in store_suffixes(side["store"]).items():
        expected = side["files"][kind]["size"]
        path = with_suffix(prefix, suffix)
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


