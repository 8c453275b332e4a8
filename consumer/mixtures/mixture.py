"""``consumer.mix(parts, weights=...)``: one dataset made of datasets (issue #37).

A :class:`Mixture` numbers its samples globally: part ``p``'s samples are ids ``offset[p] .. offset[p] + len(part) - 1``
in the order of the ``parts`` dict, and the part names are its classes (``class`` of a sample = its part's index).
So every selection of a ``Consumer`` works on it (``m[k]``, ``m[a:b]``, ``m[[...]]``, ``m[{part: n}]``,
``m[{part: [i]}]``, ``m[sel, query]``, ``m[None]``), and one batch order, the step plan of
:mod:`consumer.mixtures.plan`, draws the parts by their weights for the loader and for ``create_batches``,
``get_next_batch`` and ``m[None]`` alike.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..consumer import Consumer
from ..errors import InputError, SelectionError, short_repr
from ..fetch.collate import to_tensors
from ..fetch.select import as_sample_ids, resolve, split_key
from ..query.rows import Params, Rows
from ..tokens.vocab import decode_ids
from ..training.sampler import BatchCursor, CursorMethods
from ..training.state import digest
from ..util.seeds import generator
from .blend import Blend, BlendIndex, blend_reader, blend_weights, check_blend_parts
from .checks import check_num_samples, check_parts, check_sampling, check_seed
from .cursor import MixtureCursor
from .describe import mixture_from_dict, mixture_json, write_report
from .epochs import MIXTURE_STATE_KIND, part_fingerprint
from .gather import fetch_mixture
from .index import MixtureIndex
from .reader import PartReader
from .schedule import WeightSchedule

if TYPE_CHECKING:
    from .sql import MixtureSQL

__all__ = ["Mixture", "mix"]


def mix(parts: dict[str, Consumer], weights: Any = None, sampling: str | None = None,
        num_samples: int | None = None, seed: int | None = None) -> Mixture:
    """One dataset made of the datasets ``parts`` (``{name: Consumer}``), each built any way (raw files, records, a
    packed store), as long as they agree on ``n_bytes``, vocabulary and ``seqlen``.

    Args:
        parts: the datasets; their names are the mixture's classes, in this order.
        weights: ``{part: weight}`` (>= 0, normalised to sum 1): the share of each part in the batch order of
            :meth:`Mixture.dataloader`, :meth:`Mixture.create_batches` and ``m[None]``. A part the dict leaves out
            gets weight 0 (it is never drawn, but ``m[...]`` still selects it). ``None``: natural, each part in
            proportion to its samples. Or a schedule of the global step (:mod:`consumer.mixtures.schedule`): a
            list of ``(step, weights)`` points (the first at step 0) or a callable ``step -> weights`` (a pure
            function of the step; one that does not pickle is not planned with in a pickled copy).
        sampling: ``None``, or ``"megatron"``: megatron-core 0.16.1's ``BlendedDataset`` as its
            ``BlendedMegatronDatasetBuilder`` makes it (:mod:`consumer.mixtures.blend`): every part built with
            ``sampling="megatron"``, ``weights`` a dict with every part > 0 and ``num_samples`` the blend's size
            asked for; ``m[k]`` is then Megatron's item ``k`` (the ``class`` column is its ``dataset_id``).
        num_samples: samples of an epoch of the batch order (the default ``epoch_size``; ``None``: ``len(m)``);
            with ``sampling="megatron"``, Megatron's training samples (the blend has ``sum(ceil(N * w_i))``).
        seed: seed of the order and of ``{part: n}`` draws (``None``: the first part's).
    """
    return Mixture(parts, weights=weights, sampling=sampling, num_samples=num_samples, seed=seed)


class Mixture(CursorMethods):
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
        self.blend: Blend | None = None
        self.index: MixtureIndex | BlendIndex
        if sampling == "megatron":
            check_blend_parts(checked)
            raw = blend_weights(weights, {name: len(part) for name, part in checked.items()}, self.num_samples)
            assert self.num_samples is not None
            self.blend = Blend(checked, raw, self.num_samples, self.seed)
            self.index = BlendIndex(self.blend, self.seqlen)
            self._readers: list[Any] = [blend_reader(name, part, index) for (name, part), index in
                                        zip(checked.items(), self.blend.indexes, strict=True)]
            sizes = {name: len(index) for name, index in zip(self.classes, self.blend.indexes, strict=True)}
        else:
            self.index = MixtureIndex(list(checked.values()), self.seqlen)
            self._readers = [PartReader(name, part.fetch_numpy) for name, part in checked.items()]
            sizes = dict(zip(self.classes, self.index.samples_per_class().tolist()))
        self.schedule = WeightSchedule(weights, sizes)  # the weights of every global step of the loader's plan
        # static weights (None: natural); a schedule's weights at step 0
        self._given = None if self.schedule.kind == "natural" else self.schedule.first()
        self._loader_ref: Any = None
        self._select_rng = generator(self.seed, "select")
        # a blend's cursor (over its items) is made by create_batches: nothing per sample at mix()
        self._cursor: MixtureCursor | BatchCursor = self._new_cursor(steps=True)

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
            if self.blend is not None and isinstance(selection, dict):
                raise SelectionError(f"part selections such as {short_repr(selection)} are not supported with "
                                     "sampling='megatron': Megatron's blend interleaves the parts, so no part owns a "
                                     "range of samples; select by sample id (an int, a slice, a list) or m[None]")
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
        return fetch_mixture(self._readers, self.index, ids, query, pad=self.vocab.pad, epoch=epoch,
                             width=width, out_dtype=out_dtype)

    def decode(self, ids: Any, *, specials: str = "skip") -> bytes:
        """Bytes of a token sequence (one row)."""
        return decode_ids(ids, self.vocab, specials=specials)

    # ----------------------------------------------------------------- batch order
    def _new_cursor(self, steps: bool) -> MixtureCursor | BatchCursor:
        """The cursor of the step plan (``steps``), or one over the items (a blend's order, token budgets)."""
        if steps:
            return MixtureCursor(self, self._describe)
        return BatchCursor(self.index.sample_class, self.classes, self.index.sample_tokens(), self.seed, self._describe)

    def _ready(self) -> MixtureCursor | BatchCursor:
        """The cursor; ``m[None]`` without :meth:`create_batches` serves one sample at a time in the weighted order."""
        if self._cursor.plan is None:
            self.create_batches(1)
        return self._cursor

    def _items(self, options: dict[str, Any]) -> bool:
        """Whether a batch order with these options is over the items (a blend's order, or natural weights under
        a token budget: fairseq's batches), not the step plan."""
        return self.blend is not None or (options.get("max_tokens") is not None and self.schedule.kind == "natural")

    def create_batches(self, batch_size: int | None, drop_last: bool = False, seed: int | None = None,
                       shuffle: bool = True, **plan: Any) -> None:
        """``m[None]``/:meth:`get_next_batch` batches: the step plan of :meth:`dataloader` with the same arguments
        (:mod:`consumer.mixtures.cursor`; ``plan``: ``rank``, ``world_size``, ``epoch_size``, ``exhausted``,
        ``max_tokens``), so the same batches in the same order, and either's state resumes the other. A blend's
        items, and ``max_tokens`` over natural weights, follow the order of a dataset's ``create_batches`` over the
        items. ``drop_last`` has no effect on the step plan: every batch of it is full (or as the budget lets it)."""
        cursor = self._new_cursor(not self._items(plan))
        if isinstance(cursor, MixtureCursor):
            cursor.start(batch_size, seed=seed, shuffle=shuffle, **plan)
        else:
            cursor.epochs(batch_size, drop_last, seed, shuffle, int(bool(self._mask().get("add_cls"))), **plan)
        self._cursor = cursor

    def load_state_dict(self, state: dict) -> None:
        """Continue the batch iterator from a :meth:`state_dict` taken on an identical mixture (or from the state
        of its :meth:`dataloader`)."""
        steps = isinstance(state, dict) and state.get("kind") == MIXTURE_STATE_KIND
        if steps != isinstance(self._cursor, MixtureCursor):
            self._cursor = self._new_cursor(steps)
        self._cursor.load(state)

    def dataloader(self, batch_size: int | None, **options: Any) -> Any:
        """A resumable loader over the mixture's step plan (:mod:`consumer.mixtures.plan`,
        :func:`consumer.mixtures.loading.make_mixture_loader`): ``seed=, rank=, world_size=, epoch_size=`` (default
        ``num_samples``, else ``len(m)``), ``query=, shuffle=, num_workers=, exhausted="repeat"|"stop",
        log_proportions_every=, prefetch_threads=, transport=`` and torch options. The weights (a dict or a
        schedule) give every global step's counts per part. ``max_tokens=T``: each step's draws cut by the budget
        ``rows x longest <= T`` (:mod:`consumer.mixtures.budget`; ``batch_size`` the most rows); over natural
        weights, fairseq's batches of the items instead (every sample once per epoch). A blend
        (``sampling="megatron"``) is served by :func:`~consumer.training.loader.make_loader` over its items (the
        weights are in the blend already): ``shuffle=False`` serves them in Megatron's order, ``0, 1, 2, ...``."""
        if self._items(options):  # a blend, or natural weights under a token budget: a loader over the items
            from ..training.loader import make_loader  # noqa: PLC0415  (torch loads only when a loader is made)
            ds: Any = self
            return make_loader(ds, batch_size, **options)
        from .loading import make_mixture_loader  # noqa: PLC0415
        if batch_size is None:
            raise InputError("batch_size must be an int >= 1: with weights, a token budget's steps need the most rows "
                             "of a batch (None only goes with max_tokens over natural weights)")
        loader = make_mixture_loader(self, batch_size, **options)
        self._loader_ref = weakref.ref(loader)
        return loader

    def proportions(self, window: int) -> dict[str, float]:
        """Each part's share of the samples of the last ``window`` global steps served by the latest
        :meth:`dataloader` (see ``MixtureLoader.proportions``)."""
        loader = self._loader_ref() if self._loader_ref is not None else None
        if loader is None:
            raise InputError("proportions(window) reports what a loader served: make one with m.dataloader(...)")
        shares: dict[str, float] = loader.proportions(window)
        return shares

    # ----------------------------------------------------------------- SQL, filters, report (sql.py, describe.py)
    def sql(self, statement: str, params: Params = (), *, timeout: float | None = None, max_rows: int | None = None,
            dialect: str = "duckdb") -> Rows:
        """One read-only SQL statement over the union of the parts: the views ``files`` and ``documents`` with a
        ``part`` column (``file_id``/``doc_id`` stay each part's own; see :mod:`consumer.mixtures.sql`)."""
        from .sql import check_dialect  # noqa: PLC0415  (duckdb loads with the first statement)
        check_dialect(dialect)
        return self._sql_engine().query(statement, params, timeout=timeout, max_rows=max_rows)

    def to_arrow(self, statement: str, params: Params = (), *, timeout: float | None = None) -> Any:
        """:meth:`sql`'s answer as a ``pyarrow.Table``."""
        return self._sql_engine().query_arrow(statement, params, timeout=timeout)

    def _sql_engine(self) -> MixtureSQL:
        engine = self.__dict__.get("_mixture_sql")
        if engine is None:
            from .sql import MixtureSQL  # noqa: PLC0415  (duckdb loads with the first statement)
            engine = self.__dict__["_mixture_sql"] = MixtureSQL(self._parts)
        return engine

    def where(self, condition: Any, params: Any = ()) -> Mixture:
        """A new mixture of ``part.where(condition, params)`` for every part (the condition runs inside each part,
        on its own ``files``/``documents`` views, so it cannot name ``part``), with the same weights, sampling,
        ``num_samples``, seed and mode. A part the condition leaves empty is refused (SelectionError naming it):
        dropping it would change the mixture's proportions; build a mixture without it instead."""
        kept: dict[str, Consumer] = {}
        for name, part in self._parts.items():
            try:
                kept[name] = part.where(condition, params)
            except SelectionError as e:
                raise SelectionError(f"part {name!r}: {e} (a mixture's where keeps every part; mix the parts "
                                     "you want without this one)") from e
        out = Mixture(kept, weights=self._weights_given(), sampling=self.sampling, num_samples=self.num_samples,
                      seed=self.seed)
        out.mode = self.mode
        return out

    def to_json(self, fp: Any = None, include_files: bool = False) -> str | None:
        """:meth:`get_dict` as indented JSON (written to ``fp``, a path, and None returned when given);
        ``include_files=True`` lists every part's files, which :meth:`from_json` needs."""
        return mixture_json(self, fp, include_files, weights=self._weights_given())

    def _weights_given(self) -> Any:
        """The weights as given to :func:`mix` (a schedule's own points or function), else the static ones."""
        return self.schedule.given

    @classmethod
    def from_dict(cls, d: Any, *, cache_dir: Any = None, verbose: bool = False) -> Mixture:
        """Rebuild the mixture a ``get_dict(include_files=True)`` (or its ``to_json`` text or file) describes."""
        parts, settings = mixture_from_dict(d, cache_dir=cache_dir, verbose=verbose)
        mode = settings.pop("mode")
        out = cls(parts, **settings)
        out.mode = mode
        return out
    from_json = from_dict

    def report(self, path: Any, steps: int | None = None, batch_size: int | None = None) -> str:
        """Write the mixture's report (one HTML page: each part's documents, tokens and shares, the weights and,
        given ``steps`` and ``batch_size``, the epochs each part goes through, with a warning past 4)."""
        return write_report(self, path, steps, batch_size)

    # ----------------------------------------------------------------- description and pickling
    def _describe(self, include_files: bool = False) -> dict[str, Any]:
        """:meth:`get_dict` without the cursor's state."""
        parts = {name: part.get_dict(include_files=include_files) for name, part in self._parts.items()}
        return {
            "mixture": parts,
            "weights": None if self._given is None else dict(self._given),
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
            "files_sha256": digest({name: part_fingerprint(d) for name, d in parts.items()}),
        }

    def get_dict(self, include_files: bool = False) -> dict:
        """The mixture: each part's ``get_dict(include_files)`` under ``"mixture"``, the weights (None: natural),
        seed, row shape, classes (the parts), counts and the batch order's settings (``"batches"``, after
        :meth:`create_batches`)."""
        out = self._describe(include_files)
        cursor = self._cursor
        if isinstance(cursor, MixtureCursor) and cursor.plan is not None:
            out["batches"] = {k: v for k, v in cursor.plan.settings().items() if k != "n_samples"}
        elif isinstance(cursor, BatchCursor) and cursor.plan is not None:
            out["batches"] = {k: v for k, v in cursor.state_dict().items() if k not in ("version", "epoch", "position")}
        return out

    def __getstate__(self) -> dict:  # the parts pickle themselves (how to rebuild them); the cursor as a snapshot
        return {"parts": self._parts, "weights": self.schedule.for_pickle(), "sampling": self.sampling,
                "num_samples": self.num_samples, "seed": self.seed, "select": self._select_rng,
                "batcher": (isinstance(self._cursor, MixtureCursor), self._cursor.snapshot())}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["parts"], weights=state["weights"], sampling=state["sampling"],  # type: ignore[misc]
                      num_samples=state["num_samples"], seed=state["seed"])
        self._select_rng = state["select"]
        steps, snapshot = state["batcher"]
        if snapshot is not None:
            self._cursor = self._new_cursor(steps)
            self._cursor.restore(snapshot)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name!r}: {n}" for name, n in self.samples_per_class().items())
        weights = "None" if self._given is None else \
            "{" + ", ".join(f"{k!r}: {v:.4g}" for k, v in self._given.items()) + "}"
        return f"Mixture(parts={{{sizes}}}, weights={weights}, n_bytes={self.n_bytes}, seqlen={self.seqlen})"
