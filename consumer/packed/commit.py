"""The one commit path of every store write (:func:`~consumer.packed.write.pack` and
:func:`~consumer.packed.merge.merge_packed`).

Every file is written under a temporary prefix in the target directory (hidden ``.name.<hex>.tmp`` names, each
file fsynced), the sidecar included; then an older sidecar is removed, the data files and the table are renamed
into place, and the sidecar last. Nothing at the target is touched before every byte is written, so a full disk
or a file-size limit (:class:`~consumer.errors.StorageFullError`, naming the prefix and the bytes needed) leaves a
previous store there whole. A write killed part-way leaves only hidden temporary files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..util.fileio import discard, fsync_dir, space_for, temp_path
from .layout import SIDECAR_SUFFIX, store_suffixes, with_suffix
from .sums import SIDECAR_KEY, SUMS_SUFFIX, sidecar_entry, write_sums_file


class _Both:
    """Feeds every ``update`` to two digests (the sha256 and the chunk sums of the token data)."""

    def __init__(self, a, b) -> None:
        self.a, self.b = a, b

    def update(self, data) -> None:
        self.a.update(data)
        self.b.update(data)


def _commit(tmp: Path, prefix: Path, fmt: str, sidecar: dict) -> dict[str, dict]:
    """Write the sidecar under the temporary prefix too, then rename the store files into place, the sidecar
    last; returns its ``files``. Every byte is written before anything at ``prefix`` is touched: a disk that
    fills up (or a size limit) fails the pack while the previous store there is still whole."""
    kinds = store_suffixes(fmt)
    files = {}
    for kind, suffix in kinds.items():
        files[kind] = {"name": prefix.name + suffix, "size": os.stat(with_suffix(tmp, suffix)).st_size}
    sidecar = dict(sidecar, files=files)
    if SIDECAR_KEY in sidecar:  # the chunk sums file, committed with the data files (see consumer.packed.sums)
        kinds = dict(kinds, sums=SUMS_SUFFIX)
        sidecar[SIDECAR_KEY] = dict(sidecar[SIDECAR_KEY], name=prefix.name + SUMS_SUFFIX,
                                    size=os.stat(with_suffix(tmp, SUMS_SUFFIX)).st_size)
    text = json.dumps(sidecar, indent=1, sort_keys=False).encode("utf-8")
    with open(with_suffix(tmp, SIDECAR_SUFFIX), "xb") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    with_suffix(prefix, SIDECAR_SUFFIX).unlink(missing_ok=True)  # an old sidecar never describes new data
    fsync_dir(prefix.parent)
    # the file table first: a prefix with data files and no table is a store another tool wrote (packed/peer.py),
    # so a pack stopped between these renames must leave its table in place ("incomplete pack", not another store)
    for kind in sorted(kinds, key=lambda k: k != "table"):
        os.replace(with_suffix(tmp, kinds[kind]), with_suffix(prefix, kinds[kind]))
    fsync_dir(prefix.parent)
    os.replace(with_suffix(tmp, SIDECAR_SUFFIX), with_suffix(prefix, SIDECAR_SUFFIX))
    fsync_dir(prefix.parent)
    return files


def _write_store(final: Path, fmt: str, write, sidecar: dict, need: int) -> dict[str, dict]:
    """Run ``write(tmp_prefix)`` (which writes the store's files under a temporary prefix), then commit;
    on any failure (or a kill signal turned into an exception) remove every temporary file. Running out of
    room (about ``need`` bytes are written) is a :class:`~consumer.errors.StorageFullError` naming the prefix."""
    tmp = temp_path(final)
    try:
        with space_for(final, need, "prefix (the packed store)"):
            write(tmp)
            return _commit(tmp, final, fmt, sidecar)
    except BaseException:
        for suffix in [*store_suffixes(fmt).values(), SUMS_SUFFIX, SIDECAR_SUFFIX]:
            discard(with_suffix(tmp, suffix))
        raise


def _write_sums(tmp: Path, sidecar: dict, sums) -> None:
    """Write the chunk sums under the temporary prefix and record them in the sidecar (size set at commit)."""
    write_sums_file(with_suffix(tmp, SUMS_SUFFIX), sums)
    sidecar[SIDECAR_KEY] = sidecar_entry("", 0, sums)


def _summary(prefix: Path, fmt: str, dtype: np.dtype, files: dict, documents: int, tokens: int,
             source_bytes: int, seconds: float) -> dict:
    sums = with_suffix(prefix, SUMS_SUFFIX)
    files = dict(files, sums={"name": sums.name, "size": sums.stat().st_size})  # the chunk sums, written with it
    return {
        "prefix": str(prefix),
        "format": fmt,
        "dtype": dtype.name,
        "documents": int(documents),
        "tokens": int(tokens),
        "source_bytes": int(source_bytes),
        "bytes": int(sum(f["size"] for f in files.values())),
        "files": {kind: str(prefix.parent / f["name"]) for kind, f in files.items()}
        | {"sidecar": str(with_suffix(prefix, SIDECAR_SUFFIX))},
        "seconds": seconds,
    }

