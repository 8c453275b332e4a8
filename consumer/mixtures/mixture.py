"""``consumer.mix(parts, weights=...)``: one dataset made of datasets (issue #37, static weights).

A :class:`Mixture` numbers its samples globally: part ``p``'s samples are ids ``offset[p] .. offset[p] + len(part) - 1``
in the order of the ``parts`` dict, and the part names are its classes (``class`` of a sample = its part's index).
So every selection of a ``Consumer`` works on it (``m[k]``, ``m[a:b]``, ``m[[...]]``, ``m[{part: n}]``,
``m[{part: [i]}]``, ``m[sel, query]``, ``m[None]``), and the one batch order of :mod:`consumer.training` (the loader,
``create_batches``, ``get_next_batch``, states) draws parts by their weights as it draws classes by a ``balance``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..consumer import Consumer
from ..errors import InputError, short_repr
from ..fetch.collate import to_tensors
from ..fetch.select import as_sample_ids, resolve, split_key
from ..tokens.vocab import decode_ids
from ..training.sampler import BatchCursor
from ..training.state import dataset_fingerprint, digest
from ..util.seeds import generator
from .checks import check_num_samples, check_parts, check_sampling, check_seed, check_weights
from .gather import fetch_mixture
from .index import MixtureIndex

__all__ = ["Mixture", "mix"]
_DEFAULT = object()


def mix(parts: dict[str, Consumer], weights: dict[str, float] | None = None, sampling: str | None = None,
        num_samples: int | None = None, seed: int | None = None) -> Mixture:
    """One dataset made of the datasets ``parts`` (``{name: Consumer}``), each built any way (raw files, records, a
    packed store), as long as they agree on ``n_bytes``, vocabulary and ``seqlen``.

    Args:
        parts: the datasets; their names are the mixture's classes, in this order.
        weights: ``{part: weight}`` (>= 0, normalised to sum 1): the share of each part in the batch order of
            :meth:`Mixture.dataloader`, :meth:`Mixture.create_batches` and ``m[None]``. A part the dict leaves out
            gets weight 0 (it is never drawn, but ``m[...]`` still selects it). ``None``: natural, each part in
            proportion to its samples. Schedules (a callable, or ``(step, weights)`` points) are not supported yet.
        sampling: ``None`` (Megatron's blend, ``"megatron"``, is not supported yet).
        num_samples: samples of an epoch of the batch order (the default ``epoch_size``; ``None``: ``len(m)``).
        seed: seed of the order and of ``{part: n}`` draws (``None``: the first part's).
    """
    return Mixture(parts, weights=weights, sampling=sampling, num_samples=num_samples, seed=seed)


class Mixture:
    """A dataset made of datasets (see :func:`mix`). Attributes: ``parts`` (dict), ``classes`` (the part names),
    ``class_to_id`` (``{part: index}``), ``weights`` (normalised, natural ones when none were given), ``vocab``,
    ``seqlen``, ``n_bytes``, ``seed``, ``num_samples``, ``index`` (:class:`~consumer.mixtures.index.MixtureIndex`)."""

    mode: str | None = None  # the query of m[sel] and get_next_batch() (the parts' own modes do not apply)

    def __init__(self, parts: dict[str, Consumer], *, weights: Any = None, sampling: Any = None,
                 num_samples: Any = None, seed: Any = None):
        checked = check_parts(parts)
        check_sampling(sampling)
        self._parts = checked
        self.classes = list(checked)
        self.class_to_id = {name: i for i, name in enumerate(self.classes)}
        first = next(iter(checked.values()))
        self.vocab, self.seqlen, self.n_bytes = first.vocab, int(first.seqlen), int(first.vocab.n_bytes)
        self.sampling, self.num_samples = sampling, check_num_samples(num_samples)
        self.seed = check_seed(seed, checked)
        self.index = MixtureIndex(list(checked.values()), self.seqlen)
        sizes = dict(zip(self.classes, self.index.samples_per_class().tolist()))
        self._given = check_weights(weights, sizes)  # None: natural
        self._select_rng = generator(self.seed, "select")
        self._cursor = BatchCursor(np.zeros(0, dtype=np.int32), self.classes, np.zeros(0, dtype=np.int64),
                                   self.seed, self._describe)
        self._cursor_ready = False

    # ----------------------------------------------------------------- what it is
    @property
    def parts(self) -> dict[str, Consumer]:
        """The parts, by name (a copy of the dict; the datasets themselves)."""
        return dict(self._parts)

    @property
    def weights(self) -> dict[str, float]:
        """Each part's share of the batch order (sums to 1): the given weights normalised, else the parts' sizes'."""
        if self._given is not None:
            return dict(self._given)
        sizes = self.index.samples_per_class().astype(np.float64)
        total = sizes.sum()
        return {c: float(s / total) if total else 0.0 for c, s in zip(self.classes, sizes)}

    @property
    def n_classes(self) -> int:
        """Number of parts (the mixture's classes)."""
        return len(self.classes)

    def __len__(self) -> int:
        return len(self.index)

    def samples_per_class(self) -> dict[str, int]:
        """Samples of each part."""
        return dict(zip(self.classes, self.index.samples_per_class().tolist()))

    @property
    def _balance(self) -> dict[str, float] | None:
        return None if self._given is None else dict(self._given)

    def _mask(self, described: dict[str, dict] | None = None) -> dict[str, Any]:
        """The parts' masking settings: one dict when they agree, else each part's (with ``add_cls`` if any has)."""
        described = described or {name: part.get_dict() for name, part in self._parts.items()}
        settings = {name: d["mask"] for name, d in described.items()}
        values = list(settings.values())
        if all(v == values[0] for v in values):
            return dict(values[0])
        return {"add_cls": any(bool(v.get("add_cls")) for v in values), "parts": settings}

    # ----------------------------------------------------------------- selections and fetches
    def __getitem__(self, key: Any) -> dict:
        selection, query, given = split_key(key)
        query = query if given else self.mode
        if selection is not None:
            ids = resolve(selection, len(self), self.index.class_ptr, self.classes, self._select_rng)
            return to_tensors(self.fetch_numpy(ids, query))
        ids, epoch, width = self._ready().next()
        return to_tensors(self.fetch_numpy(ids, query, epoch=epoch, width=width))

    def fetch(self, sample_ids: Any, query: Any = None, *, epoch: int = 0, out_dtype: Any = np.int64) -> dict:
        """The columns of ``query`` for these global sample ids, as tensors (``epoch`` varies the masks)."""
        return to_tensors(self.fetch_numpy(as_sample_ids(sample_ids, len(self)), query, epoch=epoch,
                                           out_dtype=out_dtype))

    def fetch_numpy(self, sample_ids: np.ndarray, query: Any = None, *, epoch: int = 0, width: int | None = None,
                    out_dtype: Any = np.int64) -> dict[str, np.ndarray]:
        """:meth:`fetch` as numpy: each part reads its rows (``width`` narrows rows, ``out_dtype`` as a Consumer's)."""
        ids = np.asarray(sample_ids, dtype=np.int64).reshape(-1)
        n = len(self)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise InputError(f"sample_ids must be in [0, {n}), got {short_repr(ids.tolist())}")
        return fetch_mixture(list(self._parts.values()), self.index, ids, query, pad=self.vocab.pad, epoch=epoch,
                             width=width, out_dtype=out_dtype)

    def decode(self, ids: Any, *, specials: str = "skip") -> bytes:
        """Bytes of a token sequence (one row)."""
        return decode_ids(ids, self.vocab, specials=specials)

    # ----------------------------------------------------------------- batch order
    def _ready(self) -> BatchCursor:
        """The cursor; ``m[None]`` without :meth:`create_batches` serves one sample at a time in the weighted order."""
        if self._cursor.plan is None:
            self.create_batches(1)
        return self._cursor

    def _ready_arrays(self) -> None:
        """Give the cursor the mixture's per-sample arrays (made on first use, not at ``mix()``)."""
        if not self._cursor_ready:
            c = self._cursor
            c.sample_class, c.lengths = self.index.sample_class, self.index.sample_tokens()
            self._cursor_ready = True

    def _plan_defaults(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with the mixture's weights as ``balance`` and ``num_samples`` as ``epoch_size`` (unless given;
        a token budget serves every sample once, so it takes neither)."""
        out = dict(options)
        if out.get("max_tokens") is not None:
            if self._given is not None and "balance" not in out:
                raise InputError(f"max_tokens={short_repr(out['max_tokens'])} serves every sample once per epoch: "
                                 f"a mixture with weights={short_repr(self._given)} does not take it yet")
            return out
        out.setdefault("balance", self._balance)
        out.setdefault("epoch_size", self.num_samples)
        return out

    def create_batches(self, batch_size: int | None, drop_last: bool = False, seed: int | None = None,
                       shuffle: bool = True, **plan: Any) -> None:
        """``m[None]``/:meth:`get_next_batch` batches in :meth:`dataloader`'s order (``plan``: its keyword options)."""
        self._ready_arrays()
        extra = int(bool(self._mask().get("add_cls")))
        self._cursor.epochs(batch_size, drop_last, seed, shuffle, extra, **self._plan_defaults(plan))

    def batches(self, epoch: int) -> list[np.ndarray]:
        """The global sample ids of every batch of ``epoch``, in serving order (after :meth:`create_batches`)."""
        return self._cursor.batches(epoch)

    def get_next_batch(self, query: Any = _DEFAULT) -> dict:
        """The next batch (see :meth:`create_batches`); ``query`` defaults to ``None`` (the token rows)."""
        return self[None, self.mode if query is _DEFAULT else query]

    def state_dict(self) -> dict:
        """JSON-able position of the batch iterator (epoch, batches served), for exact resumption."""
        return self._cursor.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Continue the batch iterator from a :meth:`state_dict` taken on an identical mixture."""
        self._ready_arrays()
        self._cursor.load(state)

    def dataloader(self, batch_size: int | None, **options: Any) -> Any:
        """A resumable torch DataLoader over the mixture (workers, ranks, ``max_tokens`` ...: see ``make_loader``),
        drawing parts by the weights (``balance`` defaults to them, ``epoch_size`` to ``num_samples``)."""
        from ..training.loader import make_loader  # noqa: PLC0415  (torch loads only when a loader is made)
        ds: Any = self
        return make_loader(ds, batch_size, **self._plan_defaults(options))

    # ----------------------------------------------------------------- description and pickling
    def _describe(self, include_files: bool = False) -> dict[str, Any]:
        """:meth:`get_dict` without the cursor's state."""
        parts = {name: part.get_dict(include_files=include_files) for name, part in self._parts.items()}
        return {
            "mixture": parts,
            "weights": self._balance,
            "sampling": self.sampling,
            "num_samples": self.num_samples,
            "seed": self.seed,
            "mode": self.mode,
            "mask": self._mask(parts),
            "n_bytes": self.n_bytes,
            "seqlen": self.seqlen,
            "vocab": self.vocab.to_dict(),
            "vocab_size": self.vocab.size,
            "classes": list(self.classes),
            "class_to_id": dict(self.class_to_id),
            "per_class": {name: {"samples": n} for name, n in self.samples_per_class().items()},
            "total_samples": len(self),
            # the parts' own fingerprints (files, settings, counts): a state of another mixture is refused
            "files_sha256": digest({name: dataset_fingerprint(d, mask=False) for name, d in parts.items()}),
        }

    def get_dict(self, include_files: bool = False) -> dict:
        """The mixture: each part's ``get_dict(include_files)`` under ``"mixture"``, the weights (None: natural),
        seed, row shape, classes (the parts), counts and the batch order's settings (``"batches"``, after
        :meth:`create_batches`)."""
        out = self._describe(include_files)
        if self._cursor.plan is not None:
            out["batches"] = {k: v for k, v in self._cursor.state_dict().items()
                              if k not in ("version", "epoch", "position")}
        return out

    def __getstate__(self) -> dict:  # the parts pickle themselves (how to rebuild them); the cursor as a snapshot
        return {"parts": self._parts, "weights": self._given, "sampling": self.sampling,
                "num_samples": self.num_samples, "seed": self.seed, "select": self._select_rng,
                "batcher": self._cursor.snapshot()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["parts"], weights=state["weights"], sampling=state["sampling"],  # type: ignore[misc]
                      num_samples=state["num_samples"], seed=state["seed"])
        self._select_rng = state["select"]
        if state["batcher"] is not None:
            self._ready_arrays()
            self._cursor.restore(state["batcher"])

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name!r}: {n}" for name, n in self.samples_per_class().items())
        weights = "None" if self._given is None else \
            "{" + ", ".join(f"{k!r}: {v:.4g}" for k, v in self._given.items()) + "}"
        return f"Mixture(parts={{{sizes}}}, weights={weights}, n_bytes={self.n_bytes}, seqlen={self.seqlen})"
