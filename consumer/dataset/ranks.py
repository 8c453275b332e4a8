"""``torch.distributed`` as the build sees it: this process's rank, a broadcast from rank 0, a barrier.

A torch home of its own (next to ``collate`` and ``loader``) because building a dataset — not only
loading it — must know whether it runs in a distributed job (so that rank 0 alone lists a bucket and
builds the index; see :mod:`consumer.dataset.shared`). torch is never imported here unless the program
already imported it: a process without torch cannot have initialised ``torch.distributed``, so
``import consumer`` and every build of a program without torch stay free of it.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["TorchGroup", "torch_group"]


class TorchGroup:
    """The default ``torch.distributed`` process group, with what :func:`~consumer.dataset.shared.build_once`
    needs: ``rank``, ``size``, ``broadcast(obj)`` (``broadcast_object_list`` from rank 0) and ``barrier()``."""

    def __init__(self, dist: Any) -> None:
        self._dist = dist
        self.rank = int(dist.get_rank())
        self.size = int(dist.get_world_size())

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` (picklable) on every rank."""
        box = [obj]
        self._dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        """Wait for every rank."""
        self._dist.barrier()


def torch_group() -> TorchGroup | None:
    """The job's process group when ``torch.distributed`` is initialised with more than one rank, else None."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist  # noqa: PLC0415  (torch is loaded already: see the module docstring)

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return TorchGroup(dist)
