"""One plain row of a warm local packed store per call: the per-dataset plan behind ``ds[i]`` and ``ds.fetch([i])``.

A call of the general path (:meth:`~consumer.fetch.fetcher.Fetcher.fetch`) spends its few microseconds on checks
that give the same answer call after call for one row of the same dataset: the query's columns, the output dtype,
the fetch budget, the store's chunk sums and id blocks. :class:`OneRow` is armed by the fetcher once the general
path has served a row of a local store whose id blocks are all found clean (or whose ids are checked with its
chunk sums); from then on a call checks the chunk sums of the row's chunks not verified yet (as the general path
does, before any byte is served), copies the row (int64, PAD after the sample's tokens) and hands it to torch,
after one ``fstat`` of the data file held open (its ``mtime``/``ctime`` compared as two ints: what the general
path's stamp compares for a file that stays open; about 0.5 µs, the price of refusing a store changed in place).
Anything else — a changed data file, a sample that is not one store range, an id outside ``[0, n)``, another
query or dtype — returns None and the general path answers (and re-arms the plan if the store is still clean), so
results and errors are those of the general path.

The fetch budget: the plan is armed only when one row fits the default budget, and a call with
``$CONSUMER_MAX_BATCH_BYTES`` set (looked up per call, as the general path does) goes the general way.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .collate import torch_from_numpy
from .packed_rows import PackedRows

__all__ = ["OneRow"]

_INT64 = np.dtype(np.int64)
_BUDGET_ENV = "CONSUMER_MAX_BATCH_BYTES"
# CPython keeps ``os.environ``'s entries in a plain dict (bytes keys on POSIX) that every change of ``os.environ``
# updates: a lookup in it costs ~40 ns, ``in os.environ`` ~0.4 µs (key encoding and Mapping machinery)
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEY: object = os.environ.encodekey(_BUDGET_ENV) if hasattr(os.environ, "encodekey") else _BUDGET_ENV


def _budget_set() -> bool:
    """``$CONSUMER_MAX_BATCH_BYTES`` is set (the general path then reads and applies it)."""
    if type(_ENV_DATA) is dict:
        return _ENV_KEY in _ENV_DATA
    return _BUDGET_ENV in os.environ


class OneRow:
    """The plan of one dataset's single plain rows (see the module docstring); :meth:`row` or None."""

    def __init__(self, packed: PackedRows, n: int) -> None:
        self.packed, self.n = packed, n
        self.start, self.length, self.seqlen = packed.start, packed.length, packed.seqlen
        self.tokens, self.pad = packed.tokens, packed.pad
        self.fd = packed._fd  # -1: the general path compares no stamp either
        self.verifier = packed.store.verifier  # chunk sums: those of the row's chunks checked before it is served
        self.itemsize = int(packed.tokens.itemsize)
        self.mtime = self.ctime = -1
        self.armed = False
        self.from_numpy: Any = None
        self.env: dict[Any, Any] | None = _ENV_DATA if type(_ENV_DATA) is dict else None

    def arm(self) -> None:
        """Serve rows from now on if the store is warm: every id block clean (or ids checked with the chunk sums),
        the data file still the version the clean marks were made for."""
        p = self.packed
        self.armed = False
        self.verifier = p.store.verifier
        if not p.local:
            return
        if p.must_check:
            if not p.clean or p.stamp is None or self.fd < 0:
                return
            st = os.fstat(self.fd)
            if st.st_size != p.stamp.size or max(st.st_mtime_ns, st.st_ctime_ns) != p.stamp.stamp:
                return
            self.mtime, self.ctime = st.st_mtime_ns, st.st_ctime_ns
        if self.from_numpy is None:
            self.from_numpy = torch_from_numpy()
        self.armed = True

    def row(self, key: object) -> dict[str, Any] | None:
        """``{"input_array": [1, seqlen] int64 tensor}`` of the sample of a one-row ``key`` (a Python int, a list of
        one, a 1-element int64 array) in ``[0, n)``, or None (the general path answers)."""
        if type(key) is int:
            i = key
        elif type(key) is list and len(key) == 1 and type(key[0]) is int:
            i = key[0]
        elif type(key) is np.ndarray and key.ndim == 1 and key.size == 1 and key.dtype is _INT64:
            i = int(key[0])
        else:
            return None
        if not self.armed or not 0 <= i < self.n:
            return None
        if self.fd >= 0:
            st = os.fstat(self.fd)
            if st.st_ctime_ns != self.ctime or st.st_mtime_ns != self.mtime:  # written since: the general path
                self.armed = False  # re-checks the store and re-arms this plan if it is still clean
                return None
        env = self.env
        if (_ENV_KEY in env) if env is not None else _budget_set():  # the general path applies the budget
            return None
        s = int(self.start[i])
        if s < 0:
            return None
        n, L = int(self.length[i]), self.seqlen
        verifier = self.verifier
        if verifier is not None:  # a FormatError on a mismatch, as the general path's, before a byte is served
            if verifier.complete:  # for good (a changed file disarms this plan; arm() looks again)
                self.verifier = None
            else:
                size = self.itemsize
                verifier.check(self.tokens, s * size, (s + n) * size)
        if n == L:  # one converting copy straight out of the store
            out = self.tokens[None, s:s + L].astype(_INT64)
        else:
            out = np.empty((1, L), dtype=_INT64)
            row = out[0]
            row[:n] = self.tokens[s:s + n]
            row[n:] = self.pad
        return {"input_array": self.from_numpy(out)}
