"""What the library writes into a cache directory, and ``consumer cache clear``: removing exactly that.

Every file and folder the library creates under a cache directory, recognised by its exact name or pattern:

=============================================  ===========================================  =================
name                                           what (written by)                            cleared by
=============================================  ===========================================  =================
``index/<sha256>/``                            an index cache entry (``dataset/cache``)     ``clear``
``index/.<name>.<12 hex>.tmp*``                an interrupted entry write                   ``clear``
``index.lock``                                 the lock file of "building entry" claims     ``clear``
``parts/<kind>-<sha256>/`` (+ ``.corrupt-*``)  a cluster build's part (``scale/parts``)     ``clear``
``parts/.<name>.<12 hex>.tmp*``                an interrupted part write                    ``clear``
``ranks/<32 hex>.json`` (+ temporaries)        a shared build's hand-off (``dataset/shared``) ``clear``
``remote/remote-v1/<2 hex>/<sha256>.blk``      blocks of remote objects (``sources/block_cache``) ``clear``
``packed-remote-v1/<40 hex>/store.*``          a remote store's index copy (``packed/remote``) ``clear``
``catalog.sqlite`` (+ ``-wal``/``-shm``/``-journal``)  the file catalog (``catalog/``)             ``--catalog``
``catalog.sqlite.claims``                      the lock file of the catalog's work claims   ``--catalog``
``catalog.sqlite.corrupt-<stamp>[-wal|-shm]``  a broken catalog moved aside                 ``--catalog``
=============================================  ===========================================  =================

Anything else is left alone: a user's file next to ours, a folder of ours holding a name we never write (only
the matching names inside it go, and the folder stays), an ``index/`` folder without our ``description.json``.
A lock file that a running process holds is skipped with a warning (removing it would let a second process take
a claim the first still holds). Folders of ours are removed once empty.
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from collections.abc import Callable

from ..catalog.catalog import CATALOG_NAME, CLAIMS_SUFFIX
from ..errors import ConsumerWarning
from ..scale.parts import PARTS_DIR
from ..sources.block_cache import CACHE_SUBDIR
from ..util.fileio import is_temp_name
from ..util.locks import in_use
from .cache import ENTRY_LOCKS, INDEX_DIR, is_entry
from .shared import HANDOFF_DIR

__all__ = ["READ_THROUGH_DIR", "clear"]

READ_THROUGH_DIR = "remote"  # Storage.read_through_dir(): the block cache's directory under the cache directory
_HEX = r"[0-9a-f]"
_CATALOG_FILES = re.compile(re.escape(CATALOG_NAME) + r"(-wal|-shm|-journal|\.corrupt-\d{8}-\d{6}(-wal|-shm)?)?")
_HANDOFF = re.compile(_HEX + r"{32}\.json")
_BLOCK_DIR, _BLOCK = re.compile(_HEX + r"{2}"), re.compile(_HEX + r"{64}\.blk")
_MIRROR = re.compile(_HEX + r"{40}")
_PART = re.compile(r"(listing|files|headers)-" + _HEX + r"{64}(\.corrupt-\d{8}-\d{6}-\d+)?")


def _size(path: str) -> int:
    if os.path.isdir(path) and not os.path.islink(path):
        return sum(_size(os.path.join(path, f)) for f in os.listdir(path))
    return os.lstat(path).st_size


def _remove(path: str) -> int:
    """Delete ``path`` (a file, or a folder of ours with everything in it); the bytes freed."""
    freed = _size(path)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)
    return freed


def _files(folder: str, ours: Callable[[str], bool]) -> int:
    """Delete the plain files of ``folder`` whose names are ours (a temporary one of ours counts too), then the
    folder when nothing else is left; the bytes freed."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return 0
    freed = 0
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path) and (ours(name) or is_temp_name(name)):
            freed += _remove(path)
    _rmdir_if_empty(folder)
    return freed


def _folders(folder: str, named: re.Pattern[str], inside: Callable[[str], int]) -> int:
    """Apply ``inside`` to each sub-folder of ``folder`` with a ``named`` name, then drop ``folder`` if empty."""
    if not os.path.isdir(folder) or os.path.islink(folder):
        return 0
    freed = 0
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if named.fullmatch(name) and os.path.isdir(path) and not os.path.islink(path):
            freed += inside(path)
    _rmdir_if_empty(folder)
    return freed


def _rmdir_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:  # not empty (a user's file, a name we do not write) or already gone
        pass


def _lock_file(path: str) -> int:
    """Delete a lock file of ours unless a running process holds it (then warn and keep it)."""
    if not os.path.isfile(path):
        return 0
    if in_use(path):
        warnings.warn(f"cache clear: {path!r} is held by a running process; left in place", ConsumerWarning,
                      stacklevel=3)
        return 0
    return _remove(path)


def _ours(folder: str, owned: Callable[[str, str], bool]) -> int:
    """Remove the sub-folders of ``folder`` that ``owned(path, name)`` says are ours (never a link), then
    ``folder`` itself when that leaves it empty; the bytes freed."""
    freed = 0
    if os.path.isdir(folder) and not os.path.islink(folder):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path) and owned(path, name):
                freed += _remove(path)
        _rmdir_if_empty(folder)
    return freed


def _index(root: str) -> int:
    """The index entries (and their lock file)."""
    freed = _ours(os.path.join(root, INDEX_DIR), lambda path, name: is_entry(path) or is_temp_name(name))
    return freed + _lock_file(os.path.join(root, ENTRY_LOCKS))


def _parts(root: str) -> int:
    """The parts of cluster builds (whole folders of ours: a name we write, or a temporary one)."""
    return _ours(os.path.join(root, PARTS_DIR), lambda _, name: bool(_PART.fullmatch(name)) or is_temp_name(name))


def _blocks(root: str) -> int:
    def blocks(sub: str) -> int:
        return _folders(sub, _BLOCK_DIR, lambda d: _files(d, lambda n: bool(_BLOCK.fullmatch(n))))
    return _folders(os.path.join(root, READ_THROUGH_DIR), re.compile(re.escape(CACHE_SUBDIR)), blocks)


def _mirrors(root: str) -> int:
    from ..packed.remote import MIRROR_DIR  # noqa: PLC0415  (import consumer loads no store module)
    from ..packed.sums import SUMS_SUFFIX  # noqa: PLC0415

    names = frozenset("store" + s for s in (".idx", ".consumer.npz", ".pbin-index", SUMS_SUFFIX))
    return _folders(os.path.join(root, MIRROR_DIR), _MIRROR, lambda d: _files(d, names.__contains__))


def _catalog(root: str) -> int:
    freed = 0
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if _CATALOG_FILES.fullmatch(name) and os.path.isfile(path) and not os.path.islink(path):
            freed += _remove(path)
    return freed + _lock_file(os.path.join(root, CATALOG_NAME + CLAIMS_SUFFIX))


def clear(root: str, *, catalog: bool = False) -> int:
    """Delete every index entry, part, lock file, hand-off, remote block and remote-store copy the library wrote
    under ``root`` (and the catalog with its claims file when ``catalog``); returns the bytes freed. Nothing else is
    touched (see the module docstring for the names)."""
    if not os.path.isdir(root):
        return 0
    freed = _index(root) + _parts(root)
    freed += _files(os.path.join(root, HANDOFF_DIR), lambda n: bool(_HANDOFF.fullmatch(n)))
    freed += _blocks(root)
    freed += _mirrors(root)
    if catalog:
        freed += _catalog(root)
    return freed
