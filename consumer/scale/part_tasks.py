"""What a worker of a cluster build runs when it writes parts (:mod:`consumer.scale.parts`) instead of sending
results back: the walk of a slice of a folder, and libmagic over a run of the joined file table.

Each task calls the very function the local build calls (:func:`~consumer.sources.listing.walk_part`,
:func:`~consumer.sources.magic.describe_files`, :meth:`~consumer.catalog.catalog.Catalog.sync`,
:func:`~consumer.catalog.headers.headers_from`), writes its columns as a part under the cache directory and returns
the part's :class:`~consumer.scale.parts.PartRef` (a few hundred bytes): the client joins those, never the paths.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..catalog.catalog import CATALOG_NAME, Catalog
from ..catalog.headers import HEADER_RULES_VERSION, headers_from
from ..sources.listing import walk_part
from ..sources.magic import describe_files, libmagic_version
from ..sources.paths import PathList
from ..sources.walk import BadFiles
from .parts import PartRef, content_name, find_part, input_name, open_part, pack_texts, unpack_texts, write_part

__all__ = ["walk_part_task", "describe_part_task", "bad_files_json", "bad_files_of", "codes_of", "texts_of"]

_MAGIC = ("description", "mime")


def bad_files_json(bad: BadFiles) -> dict:
    """A :class:`BadFiles` as JSON facts (counts per reason, the few examples)."""
    return {"counts": dict(bad.counts), "examples": [list(e) for e in bad.examples]}


def bad_files_of(facts: dict) -> BadFiles:
    """The :class:`BadFiles` :func:`bad_files_json` wrote."""
    return BadFiles(dict(facts["counts"]), [(str(p), str(r)) for p, r in facts["examples"]])


def walk_part_task(cache_root: str, folder: str, on_bad_file: str, part: int = 0, parts: int = 1) -> PartRef:
    """The ``part``-th of ``parts`` slices of the walk of ``folder`` (:func:`walk_part`, the local scan's walk),
    written as a ``listing`` part named by its content: columns ``paths`` (NUL-joined bytes), ``path_at`` (offsets),
    ``sizes``, ``stamps``, ``ident`` (``[N, 2]`` device and inode); facts ``bad`` (what was left out)."""
    got = walk_part(folder, on_bad_file, part, parts)
    columns = {"paths": got.paths.packed(), "path_at": got.paths.offsets(), "sizes": got.sizes,
               "stamps": got.stamps, "ident": got.ident}
    facts = {"bad": bad_files_json(got.bad)}
    return write_part(cache_root, content_name("listing", columns, facts), columns, facts, len(got.sizes))


def codes_of(values: Sequence[str | None]) -> tuple[np.ndarray, list[str]]:
    """``values`` as int32 codes into a table of their distinct texts (sorted); None is code -1."""
    table = sorted({v for v in values if v is not None})
    lookup = {t: i for i, t in enumerate(table)}
    codes = np.fromiter((-1 if v is None else lookup[v] for v in values), dtype=np.int32, count=len(values))
    return codes, table


def texts_of(columns: dict[str, np.ndarray], name: str) -> list[str]:
    """The table of texts of the coded column ``name`` of a part (``<name>_text``, ``<name>_at``)."""
    return unpack_texts(columns[f"{name}_text"], columns[f"{name}_at"])


def _coded(name: str, values: Sequence[str | None]) -> dict[str, np.ndarray]:
    codes, table = codes_of(values)
    blob, at = pack_texts(table)
    return {name: codes, f"{name}_text": blob, f"{name}_at": at}


def describe_part_task(cache_root: str, files: PartRef, a: int, b: int, metadata: str, kinds: tuple[str, ...],
                       token: str) -> tuple[PartRef, int]:
    """libmagic's ``kinds`` and the documents' headers of files ``a..b`` of the joined file table ``files`` (a
    ``files`` part), as a ``headers`` part named by its inputs; the rows committed to the cache directory's catalog
    (``Catalog.sync``, its claims and chunked commits, as a local build commits them). Files whose catalog row is
    of their version already are not described again. Returns the part and the libmagic calls made for this build
    (``token``: the build; a part an earlier build made counts none). Rerun-safe: the part is written before any
    row is committed, so a rerun after a kill finds it (and its count) and only finishes the commit."""
    name = input_name("headers", {"files": files.name, "range": [a, b], "metadata": metadata, "kinds": list(kinds),
                                  "libmagic": libmagic_version(), "rules": HEADER_RULES_VERSION})
    cols = open_part(cache_root, files)
    paths = PathList(cols["paths"], cols["path_at"])[a:b]
    sizes, stamps = cols["sizes"][a:b].tolist(), cols["stamps"][a:b].tolist()
    catalog = Catalog(os.path.join(cache_root, CATALOG_NAME))
    try:
        ref = find_part(cache_root, name)
        if ref is None:
            values, calls = _described(catalog, paths, sizes, stamps, kinds)
            columns = _coded("header", headers_from(metadata, paths, values["description"], values["mime"]))
            for k in kinds:
                columns.update(_coded(k, values[k]))
            ref = write_part(cache_root, name, columns, {"calls": calls, "token": token, "kinds": list(kinds)},
                             len(paths))
        part = open_part(cache_root, ref)
        catalog.sync(paths, np.asarray(sizes), np.asarray(stamps), want=kinds, describe=_from_part(paths, part, kinds))
    finally:
        catalog.close()
    return ref, int(ref.facts["calls"]) if ref.facts.get("token") == token else 0


def _described(catalog: Catalog, paths: PathList, sizes: list[int], stamps: list[int],
               kinds: tuple[str, ...]) -> tuple[dict[str, list[str | None]], int]:
    """Per kind the value of every file: from its catalog row when the row is of the file's version and has it,
    else from libmagic (:func:`describe_files`, as a local build's sync calls it); and the libmagic calls made."""
    known = catalog.rows(paths)
    values: dict[str, list[str | None]] = {k: [None] * len(paths) for k in _MAGIC}
    stale = []
    for i, p in enumerate(paths):
        row = known.get(p)
        if row is not None and row[0] == sizes[i] and row[1] == stamps[i] and \
                all(row[2 + _MAGIC.index(k)] is not None for k in kinds):
            for k in kinds:
                values[k][i] = row[2 + _MAGIC.index(k)]
        else:
            stale.append(i)
    for i, got in zip(stale, describe_files(paths.take(stale), kinds=kinds, chunk=512)):
        for k in kinds:
            values[k][i] = got[_MAGIC.index(k)]
    return values, len(stale) * len(kinds)


def _from_part(paths: PathList, part: dict[str, np.ndarray],
               kinds: tuple[str, ...]) -> Callable[..., Iterator[tuple[str | None, str | None]]]:
    """A ``describe`` for :meth:`Catalog.sync` that looks the values up in the part (no libmagic)."""
    where = {p: i for i, p in enumerate(paths)}
    tables = {k: texts_of(part, k) for k in kinds}

    def describe(todo: Sequence[str], *, kinds: Sequence[str] = _MAGIC, verbose: bool = False,
                 chunk: int = 0) -> Iterator[tuple[str | None, str | None]]:
        for p in todo:
            i = where[p]
            got: list[str | None] = [None, None]
            for k in kinds:
                code = int(part[k][i])
                got[_MAGIC.index(k)] = None if code < 0 else tables[k][code]
            yield got[0], got[1]

    return describe
