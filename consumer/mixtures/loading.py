"""``m.dataloader(...)``: the training loader over a mixture's batch plan (:mod:`consumer.mixtures.plan`).

The loader is the one of :mod:`consumer.training.loader` (in process, prefetch threads, or worker processes through
the shared-memory ring): :class:`~consumer.mixtures.epochs.MixtureEpochs` shows it the plan as epochs, made step by
step as they are read (the first batch, or the first after a resume, costs one step of the plan).
``loader.epoch`` and ``len(loader)`` keep their meaning; the plan's global step is ``epoch * len(loader) +
position``. The state is :func:`~consumer.mixtures.epochs.order_state`'s: :meth:`MixtureLoader.load_state_dict`
continues exactly; a mixture with other weights continues from the same per-part positions with its own weights from
that step on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from ..errors import short_repr
from ..training.loader import ConsumerLoader, loader_options
from ..training.requests import Batch
from ..util.validate import check_int
from .epochs import MixtureEpochs, make_epochs, order_state, part_fingerprints, resume_order

__all__ = ["MixtureLoader", "make_mixture_loader"]

logger = logging.getLogger("consumer.mixtures")


class MixtureLoader(ConsumerLoader):
    """A :class:`~consumer.training.loader.ConsumerLoader` over a mixture's plan, with the plan's state and
    :meth:`proportions` (``log_proportions_every=N`` logs them every ``N`` steps on ``consumer.mixtures``)."""

    plan: MixtureEpochs  # type: ignore[assignment]

    def __init__(self, ds: Any, plan: MixtureEpochs, query: Any, torch_kwargs: dict[str, Any],
                 description: dict[str, Any], prefetch_threads: int, transport: str,
                 log_proportions_every: int | None):
        super().__init__(ds, plan, query, torch_kwargs, description, prefetch_threads, transport)  # type: ignore[arg-type]
        self.log_proportions_every = log_proportions_every
        self._parts = part_fingerprints(description)

    @property
    def step(self) -> int:
        """The global step of the next batch (steps served so far)."""
        return self.epoch * self.plan.batches_per_epoch + self.position

    def proportions(self, window: int) -> dict[str, float]:
        """The share of each part over the last ``window`` global steps served (all ranks), not reaching before
        the step this loader started or resumed at: ``{part: samples of it / samples}`` (zeros before any step)."""
        window = check_int("window", window, 1)
        plan = self.plan.plan
        stop = self.step
        counts = plan.counts(max(stop - window, plan.start.step, 0), stop).sum(axis=0)
        total = int(counts.sum())
        return {name: (int(c) / total if total else 0.0) for name, c in zip(plan.names, counts.tolist())}

    def __iter__(self) -> Iterator[Batch]:
        inner = super().__iter__()
        every = self.log_proportions_every
        return self._logged(inner, every) if every else inner

    def _logged(self, inner: Iterator[Batch], every: int) -> Iterator[Batch]:
        for batch in inner:
            if self.step % every == 0:
                shares = ", ".join(f"{k}={v:.4f}" for k, v in self.proportions(every).items())
                logger.info("mixture step %d: proportions over the last %d steps: %s", self.step, every, shares)
            yield batch

    # ----------------------------------------------------------------- state
    def _context(self) -> dict[str, object]:
        return {"query": self.query, "mask": self._mask_settings}

    def state_dict(self) -> dict[str, object]:
        """JSON-able (:func:`~consumer.mixtures.epochs.order_state`): the global step (and epoch, position), the
        samples taken and residual of every part, each part's epoch and position, the settings, the weights (for
        the record) and each part's fingerprint."""
        return order_state(self.plan, self.step, self._parts, self._context())

    def load_state_dict(self, state: object) -> None:
        """Continue after the last step a :meth:`state_dict` counted (a loader's, or ``m.state_dict()`` after
        ``create_batches``). The mixture must have the same parts (names and fingerprints) and settings; its
        weights may differ (they apply from the state's step on)."""
        step = resume_order(self.plan, state, self._parts, self._context())
        self._move_to(*divmod(step, self.plan.batches_per_epoch))

    def __repr__(self) -> str:
        s = self.plan
        return (f"MixtureLoader(batch_size={s.batch_size}, batches_per_epoch={s.batches_per_epoch}, step={self.step}, "
                f"rank={s.rank}, world_size={s.world_size}, weights={short_repr(s.balance, 120)}, "
                f"exhausted={s.plan.exhausted!r}, num_workers={self.num_workers})")


def make_mixture_loader(m: Any, batch_size: int, *, query: Any = None, shuffle: bool = True, seed: int | None = None,
                        drop_last: bool = False, num_workers: int = 0, epoch_size: int | None = None,
                        rank: int | None = None, world_size: int | None = None, exhausted: str = "repeat",
                        log_proportions_every: int | None = None, prefetch_threads: int | None = None,
                        transport: str | None = None, max_tokens: int | None = None,
                        **torch_kwargs: Any) -> MixtureLoader:
    """The loader of ``m.dataloader`` (see :meth:`consumer.mixtures.Mixture.dataloader`). ``drop_last`` has no
    effect: every batch of a mixture is full (or, under ``max_tokens``, as full as the budget lets it be)."""
    o = loader_options(m, query, num_workers, rank, world_size, prefetch_threads, transport, torch_kwargs,
                       reserved=("balance",))
    epochs = make_epochs(m, batch_size, seed=seed, shuffle=shuffle, rank=o.rank, world_size=o.world_size,
                         epoch_size=epoch_size, exhausted=exhausted, max_tokens=max_tokens)
    every = None if log_proportions_every is None else check_int("log_proportions_every", log_proportions_every, 1)
    return MixtureLoader(m, epochs, o.query, {"num_workers": o.num_workers, **torch_kwargs}, o.description,
                         prefetch_threads=o.threads, transport=o.transport, log_proportions_every=every)
