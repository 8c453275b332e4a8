"""Megatron GPT sampling, re-implemented exactly in numpy (the algorithms are stated below).

Three arrays describe a GPT dataset split:

* ``document_index`` (int32[epochs * docs]): the split's sequence ids tiled once per epoch and shuffled
  with ``numpy.random.RandomState`` (the last epoch shuffled on its own when it is only partly used);
* ``sample_index`` (int32 or int64 [n + 1, 2]): row *k* = (position in ``document_index``, token offset in
  that document) where sample *k* starts in the flattened token stream; row *k + 1* is where it ends,
  inclusive when ``add_extra_token`` (E=1: samples overlap by one token), exclusive when E=0;
* ``shuffle_index`` (uint32, or int64 for huge n): a permutation of ``0..n-1``.

Function names and argument order follow Megatron-core's ``_build_document_index``,
``helpers.build_sample_idx`` and ``_build_shuffle_index``; :func:`build_gpt_indices` chains them exactly
as ``GPTDataset`` does (one ``RandomState(seed)``: document shuffles first, then shuffle-index shuffles),
so the arrays are identical to Megatron's cache files for the same inputs.

:func:`build_sample_index` replaces the C++ loop by ``cumsum`` + ``searchsorted``: sample *k* starts at
flat position ``k * seq_length``; the row for flat position ``q`` is the first document position ``d``
whose end reaches ``q + E`` and the offset ``q - start(d)``. This reproduces the C++ loop exactly,
including zero-length documents, ``(d, sizes[d])`` one-past-the-end rows when E=0, and the
"ran out of documents" last row ``(D - 1, sizes[last] - E)`` when ``drop_last=False``.

Notes on fidelity:

* With ``drop_last=False`` the C++ computes ``ceil(float(num_epochs * T - E) / seq_length)`` in float32;
  we compute the same ceiling exactly in integers. The two agree below 2**24 tokens; beyond, float32
  rounding can make Megatron drop (or, tripping its own assert, crash on) the last partial sample.
* When the last document of ``document_index`` is empty and E=1, the "ran out" row's offset is
  ``0 - 1 = -1``, exactly as the C++ stores it: :func:`build_sample_index` (the C++ equivalent) returns
  it. Megatron-core's Python wrapper of the C++ then asserts ``sample_idx.min() >= 0``, so the pipeline
  never uses such an index; :func:`build_gpt_indices` (the pipeline) refuses it the same way, with an
  :class:`InputError` naming the case (``drop_last=False``, the extra token, an empty last document)
  instead of an assertion.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import InputError, short_repr

__all__ = [
    "build_document_index",
    "build_gpt_indices",
    "build_sample_index",
    "build_shuffle_index",
    "num_epochs_for",
    "num_samples_before_last_epoch",
    "sample_index_dtype",
    "separate_last_epoch_for",
    "shuffle_index_dtype",
]

_INT32_MAX = int(np.iinfo(np.int32).max)
_INT64_MAX = int(np.iinfo(np.int64).max)
_UINT32_MAX = int(np.iinfo(np.uint32).max)
_LAST_EPOCH_THRESHOLD = 0.80

Rng = np.random.RandomState | np.random.Generator


def _rng(rng_or_seed: int | Rng, name: str = "rng_or_seed") -> Rng:
    """A RandomState from a seed, or the given generator (only RandomState reproduces Megatron)."""
    if isinstance(rng_or_seed, np.random.RandomState | np.random.Generator):
        return rng_or_seed
    if isinstance(rng_or_seed, bool) or not isinstance(rng_or_seed, int | np.integer):
        raise InputError(f"{name} must be an int seed or a numpy RandomState/Generator, got {short_repr(rng_or_seed)}")
    if not 0 <= rng_or_seed <= _UINT32_MAX:
        raise InputError(f"{name}: a seed must be in [0, 2**32 - 1], got {rng_or_seed}")
    return np.random.RandomState(int(rng_or_seed))


def _extra(add_extra_token: bool | int) -> int:
    if not isinstance(add_extra_token, bool | int | np.integer | np.bool_) or add_extra_token not in (0, 1):
        raise InputError(f"add_extra_token must be a bool (or 0/1), got {short_repr(add_extra_token)}")
    return int(add_extra_token)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool | int | np.integer | np.bool_) or value not in (0, 1):
        raise InputError(f"{name} must be a bool (or 0/1), got {short_repr(value)}")
    return bool(value)


def _positive_int(value: object, name: str, minimum: int, maximum: int = _INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(f"{name} must be an int >= {minimum}, got {short_repr(value)}")
    if value > maximum:
        raise InputError(f"{name} must be an int in [{minimum}, {maximum}], got {int(value)}")
    return int(value)


def _int_array(values: object, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        raise InputError(f"{name} must be a 1-D integer array, got {short_repr(values)}") from None
    if arr.ndim != 1 or (arr.size and (not np.issubdtype(arr.dtype, np.integer))):
        raise InputError(f"{name} must be a 1-D integer array, got {short_repr(values)}")
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
        raise InputError(f"{name}: expected values <= {_INT64_MAX}, got {int(arr.max())}")
    return arr


@contextmanager
def _allocating(what: str, count: int, bytes_per_item: int) -> Iterator[None]:
    """Turn a MemoryError while building ``count`` items of ``what`` into an InputError giving the size."""
    try:
        yield
    except MemoryError:
        need = count * bytes_per_item
        raise InputError(
            f"{what}: {count} entries need about {need / 2**30:.1f} GiB, more than this machine can allocate"
        ) from None


# ------------------------------------------------------------------------------------ epochs


def num_epochs_for(
    tokens_per_epoch: int, seq_length: int, num_samples: int | None, add_extra_token: bool = True
) -> int:
    """Smallest ``e >= 1`` with ``e * tokens_per_epoch >= num_samples * seq_length + E``; 1 if num_samples is None."""
    if num_samples is None:
        return 1
    e = _extra(add_extra_token)
    tokens = _positive_int(tokens_per_epoch, "tokens_per_epoch", 1)
    length = _positive_int(seq_length, "seq_length", 1, _INT32_MAX)
    samples = _positive_int(num_samples, "num_samples", 0)
    needed = samples * length + e
    epochs = max(1, -(-needed // tokens))
    if epochs > _INT32_MAX:
        raise InputError(
            f"num_samples={samples} with seq_length={length} needs {epochs} epochs of {tokens} tokens; "
            f"Megatron counts epochs in int32 (at most {_INT32_MAX})"
        )
    return epochs


def num_samples_before_last_epoch(
    tokens_per_epoch: int, seq_length: int, num_epochs: int, add_extra_token: bool = True
) -> int:
    """Samples available from all epochs but the last: ``((num_epochs - 1) * T - E) // seq_length``."""
    e = _extra(add_extra_token)
    length = _positive_int(seq_length, "seq_length", 1)
    epochs = _positive_int(num_epochs, "num_epochs", 1)
    return ((epochs - 1) * int(tokens_per_epoch) - e) // length


def separate_last_epoch_for(
    tokens_per_epoch: int,
    seq_length: int,
    num_samples: int | None,
    num_epochs: int,
    add_extra_token: bool = True,
) -> bool:
    """Megatron's 80 % rule: shuffle the last epoch on its own when less than 80 % of it is used.

    Always False for one epoch (or ``num_samples=None``). Raises InputError where Megatron asserts
    (``num_samples`` inconsistent with ``num_epochs``).
    """
    epochs = _positive_int(num_epochs, "num_epochs", 1)
    if epochs == 1 or num_samples is None:
        return False
    e = _extra(add_extra_token)
    length = _positive_int(seq_length, "seq_length", 1)
    sans = num_samples_before_last_epoch(tokens_per_epoch, length, epochs, bool(e))
    from_final = int(num_samples) - sans
    per_epoch = (int(tokens_per_epoch) - e) // length
    if not 0 <= from_final <= per_epoch + 1:
        raise InputError(
            f"num_samples={num_samples} does not fit num_epochs={epochs}: samples from the last epoch expected "
            f"in [0, {per_epoch + 1}], got {from_final}"
        )
    return from_final < int(_LAST_EPOCH_THRESHOLD * per_epoch)


# ------------------------------------------------------------------------------------ indices


def build_document_index(
    documents: np.ndarray,
    num_epochs: int,
    rng_or_seed: int | Rng,
    separate_last_epoch: bool,
) -> np.ndarray:
    """``documents`` tiled ``num_epochs`` times (int32) and shuffled; the last epoch apart when separate.

    Same as Megatron-core ``_build_document_index(documents, num_epochs, numpy_random_state,
    separate_final_epoch)``. Pass the pipeline's RandomState (a seed creates a fresh one).
    """
    docs = _int_array(documents, "documents")
    epochs = _positive_int(num_epochs, "num_epochs", 1)
    if docs.size and (int(docs.min()) < 0 or int(docs.max()) > _INT32_MAX):
        raise InputError(
            f"documents: ids must be in [0, {_INT32_MAX}], got min {int(docs.min())}, max {int(docs.max())}"
        )
    rng = _rng(rng_or_seed)
    if not separate_last_epoch or epochs == 1:
        with _allocating("document_index", docs.size * epochs, 4):
            document_index = np.tile(docs.astype(np.int32), epochs)
        rng.shuffle(document_index)
        return document_index
    first = build_document_index(docs, epochs - 1, rng, False)
    last = build_document_index(docs, 1, rng, False)
    return np.concatenate((first, last))


def sample_index_dtype(document_index_len: int, max_size: int) -> np.dtype:
    """int32 if ``max(len(document_index), max(sizes))`` fits int32, else int64 (Megatron-core's rule)."""
    return np.dtype(np.int32 if max(document_index_len, max_size) <= _INT32_MAX else np.int64)


def shuffle_index_dtype(total_size: int) -> np.dtype:
    """uint32, or int64 when ``total_size >= 2**32 - 2`` (Megatron-core's rule)."""
    return np.dtype(np.int64 if total_size >= _UINT32_MAX - 1 else np.uint32)


def _sample_count(total: int, seq_length: int, e: int, drop_last: bool) -> int:
    """Number of samples n (the index has n + 1 rows).

    drop_last: ``(total - E) // seq_length``; else ``ceil((total - E) / seq_length)`` computed exactly
    (the C++ evaluates it in float32, which differs only beyond 2**24 tokens; see the module notes).
    """
    x = total - e
    return x // seq_length if drop_last else -(-x // seq_length)


def build_sample_index(
    sizes: np.ndarray,
    document_index: np.ndarray,
    seq_length: int,
    num_epochs: int,
    tokens_per_epoch: int,
    drop_last: bool = True,
    add_extra_token: bool = True,
) -> np.ndarray:
    """Vectorised equivalent of Megatron's C++ ``build_sample_idx`` (same arguments, same output).

    Returns an ``[n + 1, 2]`` array (int32 unless too large) of (document_index position, offset).
    Inputs are checked where the C++ asserts: ``seq_length > 1``, ``num_epochs > 0``,
    ``tokens_per_epoch > 1``; additionally the stream must hold exactly ``num_epochs * tokens_per_epoch``
    tokens (always true for indices built by :func:`build_document_index`).
    """
    sizes_arr = _int_array(sizes, "sizes")
    doc_index = _int_array(document_index, "document_index")
    length = _positive_int(seq_length, "seq_length", 2, _INT32_MAX)
    epochs = _positive_int(num_epochs, "num_epochs", 1, _INT32_MAX)
    tokens = _positive_int(tokens_per_epoch, "tokens_per_epoch", 2)
    e = _extra(add_extra_token)
    if sizes_arr.size and int(sizes_arr.min()) < 0:
        raise InputError(f"sizes: expected lengths >= 0, got {int(sizes_arr.min())}")
    if doc_index.size == 0 or int(doc_index.min()) < 0 or int(doc_index.max()) >= sizes_arr.shape[0]:
        raise InputError(
            f"document_index: expected a non-empty array of ids in [0, {sizes_arr.shape[0]}), "
            f"got {short_repr(doc_index.tolist())}"
        )
    doc_sizes = sizes_arr[doc_index].astype(np.int64)
    starts = np.zeros(doc_sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(doc_sizes, out=starts[1:])
    total = int(starts[-1])
    if total != epochs * tokens:
        raise InputError(
            f"tokens_per_epoch * num_epochs: expected the stream's token count {total}, "
            f"got {tokens} * {epochs} = {tokens * epochs}"
        )
    n = _sample_count(total, length, e, _flag(drop_last, "drop_last"))
    dtype = sample_index_dtype(doc_index.shape[0], int(sizes_arr.max()))
    with _allocating("sample_index", n + 1, 2 * dtype.itemsize + 40):  # the index plus its temporaries
        out = np.zeros((n + 1, 2), dtype=dtype)
        ends = np.arange(1, n + 1, dtype=np.int64) * length  # flat start of sample k+1 = end of sample k
        complete = ends + e <= total  # all but possibly the last row when drop_last=False
        q = ends[complete]
        d = np.searchsorted(starts, q + e, side="left") - 1  # first doc whose end reaches q + E
        out[1 : 1 + q.shape[0], 0] = d
        out[1 : 1 + q.shape[0], 1] = q - starts[d]
    if not complete.all():  # the C++ "ran out of documents" branch
        last = doc_index.shape[0] - 1
        out[-1] = (last, int(doc_sizes[last]) - e)
    return out


def build_shuffle_index(num_samples: int, total_size: int, rng_or_seed: int | Rng) -> np.ndarray:
    """``arange(num_samples)`` shuffled, followed by ``arange(num_samples, total_size)`` shuffled.

    Same as Megatron-core ``_build_shuffle_index``: dtype uint32, int64 when ``total_size >= 2**32 - 2``.
    """
    first_n = _positive_int(num_samples, "num_samples", 0)
    total = _positive_int(total_size, "total_size", first_n)
    rng = _rng(rng_or_seed)
    dtype = shuffle_index_dtype(total)
    with _allocating("shuffle_index", total, 2 * dtype.itemsize):
        first = np.arange(first_n, dtype=dtype)
        last = np.arange(first_n, total, dtype=dtype) if first_n != total else None
    rng.shuffle(first)
    if last is None:
        return first
    rng.shuffle(last)
    return np.concatenate((first, last))


def build_gpt_indices(
    sizes: np.ndarray,
    seq_length: int,
    seed: int,
    num_samples: int | None = None,
    add_extra_token: bool = True,
    drop_last: bool = True,
    indices: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Megatron ``GPTDataset``'s full pipeline: (document_index, sample_index, shuffle_index).

    ``indices`` are the split's sequence ids (default: all of ``sizes``). One ``RandomState(seed)``
    shuffles the document index first, then the shuffle index, exactly as Megatron-core does.
    InputError where Megatron-core asserts, including a negative end offset (``drop_last=False``, the
    extra token and an empty last document; see the module notes).
    """
    sizes_arr = _int_array(sizes, "sizes")
    ids = np.arange(sizes_arr.shape[0]) if indices is None else _int_array(indices, "indices")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= sizes_arr.shape[0]):
        raise InputError(f"indices: expected ids in [0, {sizes_arr.shape[0]}), got {short_repr(ids.tolist())}")
    e = _extra(add_extra_token)
    tokens_per_epoch = int(sizes_arr[ids].sum(dtype=np.int64))
    if tokens_per_epoch <= 1:
        raise InputError(f"sizes[indices]: expected more than 1 token per epoch, got {tokens_per_epoch}")
    epochs = num_epochs_for(tokens_per_epoch, seq_length, num_samples, bool(e))
    separate = separate_last_epoch_for(tokens_per_epoch, seq_length, num_samples, epochs, bool(e))
    if isinstance(seed, np.random.RandomState | np.random.Generator):
        raise InputError(f"seed must be an int (the pipeline creates its own RandomState), got {short_repr(seed)}")
    rng = _rng(seed, "seed")
    document_index = build_document_index(ids, epochs, rng, separate)
    sample_index = build_sample_index(sizes_arr, document_index, seq_length, epochs, tokens_per_epoch, drop_last,
                                      bool(e))
    if sample_index.size and int(sample_index[:, 1].min()) < 0:
        last = int(document_index[-1])
        raise InputError(
            f"drop_last=False with add_extra_token=True: the last document of the shuffled document index "
            f"(document {last}) is empty, so the last sample would end at offset -1; Megatron-core refuses this "
            f"index (its build_sample_idx asserts offsets >= 0). Use drop_last=True, add_extra_token=False, or "
            f"remove empty documents (sizes[{last}] = {int(sizes_arr[last])})"
        )
    n = sample_index.shape[0] - 1
    first = num_samples_before_last_epoch(tokens_per_epoch, seq_length, epochs, bool(e)) if separate else n
    shuffle_index = build_shuffle_index(first, n, rng)
    return document_index, sample_index, shuffle_index
