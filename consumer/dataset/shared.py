"""One build for many processes: the ranks of a ``torch.distributed`` job share one index.

Without coordination, every rank of a job that builds ``Consumer("s3://bucket/corpus/", ...)`` lists the
bucket, reads the objects' headers and writes the same catalog and index cache: N times the requests,
and N writers of one cache directory. :func:`build_once` makes rank 0 the only builder:

1. every rank computes the fingerprint of its request (``fps`` and the settings; :func:`fingerprint`)
   and rank 0 broadcasts its own; a rank whose request differs (each rank building its own shard, say)
   builds its own dataset, concurrently with rank 0;
2. rank 0 builds (lists, describes, writes the catalog and the index cache entry), then writes a
   **hand-off file** ``<cache_dir>/ranks/<random>.json`` (what the others need to open the entry without
   listing: its key and, for URLs, each object's ETag) and broadcasts its name;
3. the other ranks open the cache entry the hand-off names (a warm reopen: no listing, no stat, no
   libmagic); all ranks meet at a barrier and rank 0 deletes the hand-off file.

The cache directory must be on a file system every rank sees (one machine's disk for the ranks of one
node, or a shared file system across nodes). A rank that cannot see rank 0's hand-off file (its
``cache_dir`` is another disk) or cannot open the entry it names builds its own dataset and warns
(:class:`~consumer.errors.ConsumerWarning`). An error on rank 0 is reported to every rank (each raises
:class:`~consumer.errors.ConsumerError` naming it) instead of leaving them waiting.

The group is anything with ``rank``, ``size``, ``broadcast(obj) -> obj`` (from rank 0) and ``barrier()``:
:func:`consumer.dataset.ranks.torch_group` adapts ``torch.distributed``; no torch is imported here.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import warnings
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..errors import ConsumerError, ConsumerWarning, FormatError
from ..util.fileio import atomic_write_bytes, ensure_directory, load_json_bounded

__all__ = ["Group", "build_once", "fingerprint", "HANDOFF_DIR"]

HANDOFF_DIR = "ranks"
T = TypeVar("T")


class Group(Protocol):
    """What :func:`build_once` needs of a process group."""

    rank: int
    size: int

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""

    def barrier(self) -> None:
        """Wait until every rank arrived."""


def fingerprint(*parts: Any) -> str:
    """sha256 of the JSON of ``parts`` (anything not JSON-able by its ``repr``): equal requests, equal prints."""
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def build_once(group: Group, request: str, cache_root: str | None, build: Callable[[], T],
               publish: Callable[[T], dict | None], open_shared: Callable[[dict], T | None]) -> T:
    """The dataset of ``build()``, built by rank 0 only and opened by the other ranks (see the module docstring).

    ``request`` is this rank's :func:`fingerprint`; ``publish(built)`` gives what other ranks need (a JSON-able
    dict; None when the result cannot be shared, e.g. nothing was cached); ``open_shared(handoff)`` opens it
    (None when it cannot). Every rank calls this with the same group, in the same order.
    """
    first = group.broadcast(request if group.rank == 0 else None)
    built: Any = None
    failure: BaseException | None = None
    if group.rank == 0 or request != first:  # rank 0, and ranks asking for another dataset, build now
        try:
            built = build()
        except BaseException as e:  # noqa: BLE001  (every rank must reach the collective calls below)
            failure = e
    message: dict = {}
    if group.rank == 0:
        try:
            message = _handoff(built, failure, cache_root, publish)
        except Exception as e:  # noqa: BLE001  (a full or read-only cache_dir: the others build their own)
            message = {"file": None, "why": f"rank 0 could not share its index ({type(e).__name__}: {e})"}
    message = group.broadcast(message)
    reason = ""
    if group.rank != 0 and request == first and message.get("error") is None:
        built, reason = _open(message, cache_root, open_shared)
    group.barrier()  # every rank has read the hand-off: rank 0 removes it
    if group.rank == 0 and message.get("file") and cache_root:
        _remove(os.path.join(cache_root, HANDOFF_DIR, message["file"]))
    if failure is not None:
        raise failure
    if message.get("error") is not None and request == first:
        raise ConsumerError(f"rank 0 could not build the dataset all ranks asked for: {message['error']}")
    if built is None:
        if reason:
            warnings.warn(f"rank {group.rank}: {reason}; this rank builds its own index (put cache_dir on a file "
                          "system every rank shares to build it once)", ConsumerWarning, stacklevel=4)
        built = build()
    return built


def _handoff(built: Any, failure: BaseException | None, cache_root: str | None,
             publish: Callable[[Any], dict | None]) -> dict:
    """Rank 0: write the hand-off file; the message to broadcast names it (or the error, or nothing)."""
    if failure is not None:
        return {"error": f"{type(failure).__name__}: {failure}"}
    shared = publish(built) if cache_root else None
    if shared is None or not cache_root:
        return {"file": None, "why": "rank 0 cached nothing to share (its index cache entry was not written)"}
    name = f"{secrets.token_hex(16)}.json"
    folder = ensure_directory(os.path.join(cache_root, HANDOFF_DIR), "cache_dir")
    atomic_write_bytes(os.path.join(folder, name), json.dumps(shared).encode())
    return {"file": name}


def _open(message: dict, cache_root: str | None, open_shared: Callable[[dict], Any]) -> tuple[Any, str]:
    """Another rank: the dataset the hand-off names, or ``(None, why not)``."""
    if not message.get("file"):
        return None, message.get("why", "rank 0 shared nothing")
    if not cache_root:
        return None, "this rank has no cache_dir (cache_dir=False)"
    path = os.path.join(cache_root, HANDOFF_DIR, message["file"])
    try:
        with open(path, "rb") as f:
            handoff = load_json_bounded(f.read(), path)
    except (OSError, FormatError):
        return None, (f"cache_dir {cache_root!r} is not the one rank 0 wrote to (rank 0's hand-off file "
                      f"{message['file']} is not in it: not a shared file system?)")
    try:
        built = open_shared(handoff) if isinstance(handoff, dict) else None
    except Exception as e:  # noqa: BLE001  (this rank must still reach the barrier rank 0 waits at)
        return None, f"the index rank 0 cached could not be opened ({type(e).__name__}: {e})"
    if built is None:
        return None, f"the index rank 0 cached is not readable under cache_dir {cache_root!r}"
    return built, ""


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
