"""What the training loader hands torch's ``DataLoader``: batch requests (epoch, sample ids, row width) from a plan's
batches, and the map-style dataset that answers a whole request with one vectorised fetch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import DTypeLike

from ..errors import InputError, short_repr
from ..fetch.collate import to_tensors
from ..tokens.index import SampleIndex
from .plan import EpochPlan
from .ring import Columns

__all__ = ["Batch", "BatchDataset", "BatchRequest", "Dataset", "PlanBatchSampler", "Query", "identity"]

Query = str | list[str] | None
"""The columns of a batch, as in ``ds[sel, query]``: a mode's name, a list of columns, or None (the mode's)."""
Batch = dict[str, Any]
"""A batch as the loader yields it: column name -> ``torch.Tensor`` (torch is typed only where it is imported)."""


class Dataset(Protocol):
    """What the loader needs of a dataset (a :class:`~consumer.Consumer` is one)."""

    seed: int
    classes: list[str]
    index: SampleIndex
    seqlen: int

    def __len__(self) -> int: ...

    def get_dict(self, include_files: bool = False) -> dict[str, object]: ...

    def fetch_numpy(self, sample_ids: np.ndarray, query: Query = None, *, epoch: int = 0, width: int | None = None,
                    out_dtype: DTypeLike = np.int64) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class BatchRequest:
    """What the batch sampler sends to a worker: the epoch (it seeds the masks), the sample ids, and the row
    width (a token-budget batch's longest sample; ``None``: the dataset's ``seqlen``)."""

    epoch: int
    ids: np.ndarray
    width: int | None = None

    def __len__(self) -> int:
        return int(self.ids.size)


class BatchDataset:
    """A map-style view of a dataset for torch's ``DataLoader``: one batched read per :class:`BatchRequest`.

    ``__getitems__(request)`` returns the batch dict of tensors of ``ds.fetch_numpy(ids, query,
    epoch=epoch)``. It holds only the dataset and the query, so it pickles as the dataset does.
    """

    def __init__(self, ds: Dataset, query: Query):
        self.ds = ds
        self.query = query

    def __len__(self) -> int:
        return len(self.ds)

    def numpy(self, request: BatchRequest) -> Columns:
        """The whole batch of ``request`` as a dict of numpy columns (one vectorised fetch)."""
        if not isinstance(request, BatchRequest):
            raise InputError(f"BatchDataset reads BatchRequest(epoch, ids) objects, got {short_repr(request)}")
        return self.ds.fetch_numpy(np.asarray(request.ids, dtype=np.int64), self.query, epoch=request.epoch,
                                   width=request.width)

    def __getitems__(self, request: BatchRequest) -> Batch:
        """The whole batch of ``request`` as a dict of int64 tensors (one vectorised fetch)."""
        return to_tensors(self.numpy(request))

    __getitem__ = __getitems__


def identity(batch: Batch) -> Batch:
    """collate_fn of the loader: the batch dict is already made (a module-level function, so it pickles)."""
    return batch


class PlanBatchSampler:
    """Yields the remaining :class:`BatchRequest` s of one epoch, from a start position set before each pass."""

    def __init__(self, plan: EpochPlan):
        self.plan = plan
        self.epoch = 0
        self.start = 0
        # (epoch, its batches, their widths): once per epoch; the batches may be a lazy sequence (a mixture's
        # steps), read from the start position on only
        self._requests: tuple[int, Sequence[np.ndarray], Sequence[int | None]] | None = None

    def __iter__(self) -> Iterator[BatchRequest]:
        epoch = self.epoch
        if self._requests is None or self._requests[0] != epoch:
            batches = self.plan.batches(epoch)
            self._requests = (epoch, batches, self.plan.widths(batches))
        _, steps, widths = self._requests
        for j in range(self.start, len(steps)):
            yield BatchRequest(epoch, steps[j], widths[j])

    def forget(self) -> None:
        """Ask the plan for the epoch's batches again at the next pass."""
        self._requests = None

    def __len__(self) -> int:
        return self.plan.batches_per_epoch - self.start
