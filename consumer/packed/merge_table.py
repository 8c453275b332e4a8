"""The merged file table of :func:`~consumer.packed.merge.merge_packed`, its corpus order, and the documents' tokens
copied in that order: numpy and Arrow over the stores' mapped tables, nothing in Python per document.

- :func:`merged_table`: the inputs' paths joined into one blob (``PathList.concat``), classes and headers numbered
  in the merged lists, a path in two stores refused (Arrow's hash over the paths' bytes);
- :func:`corpus_order`: class, then path for whole files; documents inside containers by class, then container
  path (the path less its ``#record``, or a tar member's archive), then their store's own order (record order);
  Arrow sorts the UTF-8 bytes, which is the code point order of the paths as ``str``; paths that are not UTF-8
  (kept with surrogate escapes) are sorted as ``str``, as before;
- :func:`store_pieces`: the documents in the merged order as ``(tokens, lengths, first)`` chunks (what
  :func:`~consumer.packed.write.token_pieces` gives a writer), each chunk read with one checked read per input
  store of the span its documents cover there (corpus order is each store's own order, so that span is theirs
  alone), then gathered with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..formats.mmidx import copy_ranges
from ..sources.paths import PathList
from .write import chunk_segments

if TYPE_CHECKING:
    import pyarrow as pa

    from .open import Store

__all__ = ["corpus_order", "duplicated_path", "merged_table", "paths_column", "store_pieces"]

_RECORD_SUFFIX = ("lines", "jsonl", "parquet")  # a record's path: container#record
_ARCHIVE = r"(?is)^(.*?\.(?:tar|tgz|tar\.gz|tar\.bz2|tar\.xz|tar\.zst))/.*$"  # archive/member (RE2, Arrow's)
_SPAN_SLACK = 2  # a store's span of a chunk read whole when at most this many times the tokens it holds


def paths_column(paths: PathList) -> pa.Array:
    """The paths as an Arrow ``large_binary`` array: path ``i`` is ``blob[at[i]:at[i + 1] - 1]``."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    at = paths.offsets()
    with_nul = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(paths),
        [None, pa.py_buffer(at), pa.py_buffer(np.concatenate([paths.packed(), np.zeros(1, dtype=np.uint8)]))])
    return pc.binary_slice(with_nul, 0, -1)  # each path less its separator


def merged_table(stores: list[Store], headers: list[str], classes: list[str], with_header: bool,
                 ) -> tuple[PathList, np.ndarray, np.ndarray, np.ndarray]:
    """The merged file table in input order: paths, class, size and header per document, classes and headers
    numbered in the merged lists; a path in two stores is an InputError naming it and both stores."""
    h_lookup = {h: i for i, h in enumerate(headers)}
    c_lookup = {c: i for i, c in enumerate(classes)}
    parts_class, parts_size, parts_header = [], [], []
    for s in stores:
        hmap = np.array([h_lookup[h] for h in s.sidecar["headers"]], dtype=np.int64) if with_header \
            else np.zeros(1, dtype=np.int64)
        cmap = np.array([c_lookup[c] for c in s.sidecar["classes"]], dtype=np.int64)
        parts_class.append(cmap[s.doc_class])
        parts_size.append(np.asarray(s.doc_size, dtype=np.int64))
        parts_header.append(hmap[s.doc_header])
    paths = PathList.concat([s.paths for s in stores])
    _refuse_shared(stores, paths, paths_column(paths))
    return paths, np.concatenate(parts_class), np.concatenate(parts_size), np.concatenate(parts_header)


def duplicated_path(paths: PathList, column: pa.Array | None = None) -> bytes | None:
    """The bytes of a path ``paths`` holds more than once, or None (Arrow's hash of every path's bytes: no ``str``
    per path); ``column``: :func:`paths_column` of ``paths`` when the caller has it."""
    import pyarrow.compute as pc  # noqa: PLC0415

    if len(paths) < 2:
        return None
    column = paths_column(paths) if column is None else column
    if len(pc.unique(column)) == len(paths):  # (faster here than count_distinct)
        return None
    counts = pc.value_counts(column)
    return bytes(pc.filter(counts, pc.greater(counts.field("counts"), 1)).field("values")[0].as_py())


def _refuse_shared(stores: list[Store], paths: PathList, column: pa.Array) -> None:
    """InputError naming a path two stores hold (:func:`duplicated_path`; the stores named by a second look)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    value = duplicated_path(paths, column)
    if value is None:
        return
    owner = np.repeat(np.arange(len(stores)), [len(s.paths) for s in stores])
    where = np.flatnonzero(pc.equal(column, value).to_numpy(zero_copy_only=False))[:2]
    a, b = (stores[int(owner[w])] for w in where)
    path = value.decode("utf-8", "surrogateescape")
    if a is b:
        raise InputError(f"prefixes: file {path!r} is twice in {str(a.prefix)!r}; each file may be packed once")
    raise InputError(f"prefixes: file {path!r} is in two stores: {str(a.prefix)!r} and {str(b.prefix)!r}; each "
                     "file may be packed once")


def _keys(stores: list[Store], paths: PathList) -> pa.Array:
    """Each document's sort key after its class: its path (whole files) or its container's path (records)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    column = paths_column(paths)
    parts, lo = [], 0
    for s in stores:
        kind = (s.sidecar.get("spec") or {}).get("documents")
        part = column.slice(lo, len(s.paths))
        lo += len(s.paths)
        if kind in _RECORD_SUFFIX:
            part = pc.list_element(pc.split_pattern(part, "#", max_splits=1, reverse=True), 0)  # less "#record"
        elif kind == "tar":
            part = pc.replace_substring_regex(part, pattern=_ARCHIVE, replacement="\\1")
        parts.append(part)
    return pa.concat_arrays(parts) if parts else column


def corpus_order(stores: list[Store], paths: PathList, doc_class: np.ndarray) -> np.ndarray:
    """The permutation into corpus order of the inputs' documents (in input order), see the module docstring."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    keys = _keys(stores, paths)
    try:
        text = keys.cast(pa.large_string())  # UTF-8 checked: byte order is then code point order
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        names = np.array([bytes(k).decode("utf-8", "surrogateescape") for k in keys.to_pylist()], dtype=object)
        return np.lexsort((np.arange(len(paths)), names.astype(str), doc_class))
    table = pa.table({"c": pa.array(np.asarray(doc_class, dtype=np.int64)), "k": text,
                      "i": pa.array(np.arange(len(paths), dtype=np.int64))})
    order = pc.sort_indices(table, sort_keys=[("c", "ascending"), ("k", "ascending"), ("i", "ascending")])
    return np.asarray(order.to_numpy(), dtype=np.int64)


def store_pieces(readers: list[Callable[[int, int], np.ndarray]], owner: np.ndarray, starts: np.ndarray,
                 lengths: np.ndarray, chunk_tokens: int, dtype: np.dtype,
                 ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Documents of stores as ``(tokens, lengths, first)`` chunks: document ``k`` is ``lengths[k]`` tokens from
    token ``starts[k]`` of store ``owner[k]``, read through ``readers[owner[k]](start, count)`` (a checked read);
    at most ``chunk_tokens`` tokens a chunk, a long document split over chunks (``first``: its first piece)."""
    for d, a, n, first in chunk_segments(np.asarray(lengths, dtype=np.int64), chunk_tokens):
        src, own = starts[d] + a, owner[d]
        dst = np.zeros(n.size, dtype=np.int64)
        np.cumsum(n[:-1], out=dst[1:])
        out = np.empty(int(n.sum()), dtype=dtype)
        for k in np.unique(own).tolist():
            mine = np.flatnonzero(own == k)
            s, c, t = src[mine], n[mine], dst[mine]
            lo, hi = int(s.min()), int((s + c).max())
            if hi - lo <= _SPAN_SLACK * int(c.sum()) + 4096:  # the span they cover in store k: one read
                s, c, t = _coalesced(s, c, t)
                copy_ranges(out, readers[k](lo, hi - lo), s - lo, c, t)
            else:  # scattered (inputs not in corpus order): a read per document
                for s1, c1, t1 in zip(s.tolist(), c.tolist(), t.tolist()):
                    out[t1:t1 + c1] = readers[k](s1, c1)
        yield out, n, first


def _coalesced(src: np.ndarray, cnt: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ranges ``src -> dst`` of ``cnt`` tokens with each run of ranges that follow one another in both the
    source and the destination joined into one (documents of one store that stay neighbours: one copy)."""
    if src.size < 2:
        return src, cnt, dst
    joins = (src[1:] == src[:-1] + cnt[:-1]) & (dst[1:] == dst[:-1] + cnt[:-1])
    if not joins.any():
        return src, cnt, dst
    first = np.flatnonzero(np.concatenate([[True], ~joins]))
    return src[first], np.add.reduceat(cnt, first), dst[first]
