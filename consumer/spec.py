"""The dataset settings: one frozen, validated value (:class:`Spec`) that every part reads.

A :class:`Spec` holds everything that decides which samples a dataset serves: ``style``, ``n_bytes``,
``seqlen`` (as requested, and as resolved once the documents are known), ``metadata`` (the header
mode), ``long_files``, ``sampling``, ``class_to_id`` and ``seed``. It is validated once, when made;
:meth:`Spec.resolve` fills in what depends on the corpus (the resolved ``seqlen``, the default
``class_to_id``). The cache key (:meth:`Spec.key_dict`), ``get_dict``/``to_json``
(:meth:`Spec.to_dict`), the packed sidecar and ``inspect`` all read it, and :meth:`Spec.from_dict`
reads back what :meth:`Spec.to_dict` wrote.

It is a frozen dataclass rather than a pydantic model on purpose: pydantic wraps errors raised in
validators into its own ``ValidationError``, while every bad argument must raise
:class:`~consumer.errors.InputError` naming the argument and echoing the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .catalog.headers import check_metadata
from .errors import InputError, short_repr
from .sources.records.options import RecordOptions
from .tokens.index import STYLES, check_seqlen, long_files_choices
from .tokens.sampling import ConsumerSampling, MegatronSampling, Sampling, parse_sampling
from .tokens.vocab import TokenVocab, Vocab
from .util.validate import check_choice, check_class_to_id, check_int

__all__ = ["Spec", "Metadata", "metadata_name", "check_class_to_id", "headers_already_made", "DEDUPE_MODES"]

DEDUPE_MODES = (None, "content")

Metadata = str | None | Callable[[str], str]


def metadata_name(metadata: Metadata) -> str | None:
    """The JSON form of a header mode: its name, ``None``, or ``"callable"``."""
    return metadata if metadata is None or isinstance(metadata, str) else "callable"


def headers_already_made(path: str) -> str:
    """Stands for a ``metadata`` callable whose headers are tokenised already (a packed store packed with one, a
    pickled dataset built with a lambda): never called to build headers again."""
    raise InputError(f"metadata: the headers of this dataset came from a callable that is not available "
                     f"(asked for {path!r})")


@dataclass(frozen=True)
class Spec:
    """Every setting of a dataset (see the module docstring); construct it with keyword arguments."""

    style: str = "diff"
    n_bytes: int = 2
    seqlen: int | str = "auto"
    metadata: Metadata = "file"
    long_files: str | None = None  # None: the style's default ("windows" for packed, else "truncate")
    sampling: Sampling = field(default_factory=ConsumerSampling)
    class_to_id: dict[str, int] | None = None
    seed: int = 4
    dedupe: str | None = None
    resolved_seqlen: int | None = None
    records: RecordOptions = field(default_factory=RecordOptions)  # what a document is (files, or records)
    vocab_size: int | None = None  # a store another tool wrote: its ids' vocabulary (None: byte tokens, n_bytes)

    def __post_init__(self) -> None:
        check_choice("style", self.style, sorted(STYLES))
        object.__setattr__(self, "n_bytes", Vocab(self.n_bytes).n_bytes)
        object.__setattr__(self, "seqlen", check_seqlen(self.seqlen))
        check_metadata(self.metadata)
        self._resolve_long_files()
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0))
        check_choice("dedupe", self.dedupe, DEDUPE_MODES)
        sampling = parse_sampling(self.sampling)
        sampling.check(self.style, self.seqlen)
        object.__setattr__(self, "sampling", sampling)
        if self.class_to_id is not None and not isinstance(self.class_to_id, dict):
            raise InputError(f"class_to_id must be a dict {{class: int}}, got {short_repr(self.class_to_id)}")
        if self.resolved_seqlen is not None:
            object.__setattr__(self, "resolved_seqlen", check_int("resolved_seqlen", self.resolved_seqlen, 1))
        if self.vocab_size is not None:
            object.__setattr__(self, "vocab_size", TokenVocab(self.vocab_size).n_tokens)
        if not isinstance(self.records, RecordOptions):
            if not isinstance(self.records, dict):
                raise InputError(f"records must be RecordOptions or its dict, got {short_repr(self.records)}")
            object.__setattr__(self, "records", RecordOptions(**self.records))

    def _resolve_long_files(self) -> None:
        """``long_files`` checked against the style's choices, ``None`` made the style's default (the keys of diff and
        concat datasets keep ``"truncate"``)."""
        choices = long_files_choices(self.style)
        if self.long_files is None:
            object.__setattr__(self, "long_files", choices[0])
        # packed rows hold whole documents: "crop" (a diff row's window moved per epoch) means nothing there
        check_choice("long_files" if self.style != "packed" else "long_files with style='packed'", self.long_files,
                     choices)

    def __setstate__(self, state: dict) -> None:
        """Unpickle, also a spec pickled before documents inside containers existed (whole files then)."""
        self.__dict__.update({"records": RecordOptions(), "vocab_size": None, **state})

    # ------------------------------------------------------------------ derived
    @property
    def vocab(self) -> Vocab:
        """The vocabulary of ``n_bytes``, or of a store's ``vocab_size`` ids (:class:`TokenVocab`)."""
        return Vocab(self.n_bytes) if self.vocab_size is None else TokenVocab(self.vocab_size)

    @property
    def megatron(self) -> bool:
        """Whether samples follow Megatron's GPT order (``sampling="megatron"``)."""
        return isinstance(self.sampling, MegatronSampling)

    @property
    def crops(self) -> bool:
        """Whether long files are served as one moving window per epoch (``long_files="crop"``, diff style)."""
        return self.long_files == "crop" and self.style == "diff" and not self.megatron

    @property
    def with_header(self) -> bool:
        """Whether documents carry ``[header] SEP``."""
        return self.metadata is not None

    def replace(self, **changes: Any) -> Spec:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def resolve(self, doc_len: np.ndarray, classes: list[str]) -> Spec:
        """The spec with ``resolved_seqlen`` (rows' width for these documents) and a checked, complete
        ``class_to_id`` (the default when none was given)."""
        return self.replace(resolved_seqlen=self.sampling.row_width(self.seqlen, doc_len),
                            class_to_id=check_class_to_id(self.class_to_id, classes))

    def for_subset(self) -> Spec:
        """The spec of a dataset over some of this one's files: same settings and row width."""
        if self.megatron or self.resolved_seqlen is None:
            return self
        return self.replace(seqlen=self.resolved_seqlen)

    # ------------------------------------------------------------------ JSON
    def key_dict(self) -> dict:
        """The settings that decide a sample index, as JSON (part of the cache key)."""
        return {"style": self.style, "n_bytes": self.n_bytes, "seqlen": self.seqlen, "long_files": self.long_files,
                "sampling": self.sampling.key_dict(), "seed": self.seed if self.megatron else None,
                "metadata": metadata_name(self.metadata), "dedupe": self.dedupe,
                "class_to_id": None if self.class_to_id is None else dict(self.class_to_id), **self._records_dict()}

    def _records_dict(self) -> dict:
        """The record options as JSON, or nothing when documents are whole files (keys of file datasets stay as
        they were); a store's ``vocab_size`` when it has one, as ``store_vocab_size`` (the same rule; get_dict's
        ``vocab_size`` is every id of the vocabulary)."""
        out = self.records.to_dict() if self.records.records else {}
        return out if self.vocab_size is None else {**out, "store_vocab_size": self.vocab_size}

    def to_dict(self) -> dict:
        """Every setting as JSON: ``seqlen`` is the resolved width (the request if not resolved yet)."""
        return {"style": self.style, "n_bytes": self.n_bytes,
                "seqlen": self.seqlen if self.resolved_seqlen is None else self.resolved_seqlen,
                "seqlen_requested": self.seqlen, "long_files": self.long_files,
                "sampling": self.sampling.to_dict(), "metadata": metadata_name(self.metadata), "seed": self.seed,
                "dedupe": self.dedupe, "class_to_id": None if self.class_to_id is None else dict(self.class_to_id),
                **self._records_dict()}

    @classmethod
    def from_dict(cls, d: dict, metadata: Metadata | None = None) -> Spec:
        """The spec :meth:`to_dict` described (``get_dict()`` output works too). A ``"callable"`` header mode
        cannot be stored: pass the callable as ``metadata``."""
        if not isinstance(d, dict):
            raise InputError(f"spec must be a dict made by to_dict()/get_dict(), got {short_repr(d)}")
        needed = ("style", "n_bytes", "seqlen", "long_files", "sampling", "metadata", "seed")
        missing = [k for k in needed if k not in d]
        if missing:
            raise InputError(f"spec misses {missing}; pass a dict made by to_dict()/get_dict()")
        mode = d["metadata"]
        if mode == "callable":
            if metadata is None or not callable(metadata):
                raise InputError("spec: the dataset used a metadata callable; pass it again as metadata=")
            mode = metadata
        return cls(style=d["style"], n_bytes=d["n_bytes"], seqlen=d.get("seqlen_requested", d["seqlen"]),
                   metadata=mode, long_files=d["long_files"], sampling=d["sampling"],
                   class_to_id=d.get("class_to_id"), seed=d["seed"], dedupe=d.get("dedupe"),
                   records=RecordOptions(**{k: d[k] for k in RecordOptions().to_dict() if k in d}),
                   vocab_size=d.get("store_vocab_size"))  # not get_dict()'s "vocab_size" (every id, specials too)
