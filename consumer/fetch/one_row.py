"""One plain row of a warm local packed store per call: the per-dataset plan behind ``ds[i]``, ``ds.fetch([i])``
and ``ds.fetch_numpy(np.array([i]))``.

A call of the general path (:meth:`~consumer.fetch.fetcher.Fetcher.fetch`) spends its few microseconds on checks
that give the same answer call after call for one row of the same dataset: the query's columns, the output dtype,
the fetch budget, the store's chunk sums and id blocks. :class:`OneRow` is armed by the fetcher once the general
path has served a row of a local store whose id blocks are all found clean (or whose ids are checked with its
chunk sums); from then on a call checks the chunk sums of the row's chunks not verified yet (as the general path
does, before any byte is served), copies the row (int64, PAD after the sample's tokens) and hands it to torch,
after one ``fstat`` of the data file held open, the price of refusing a store changed in place: libc's ``fstat``
into a buffer compared byte for byte with the one taken when the plan was armed (every field the kernel reports,
``mtime`` and ``ctime`` to the nanosecond among them: at least as strict as the general path's stamp, and about
0.3 µs cheaper than ``os.fstat``, which builds some twenty Python objects; :mod:`consumer.sources.stat_snapshot`),
or, where that is not to be had, ``os.fstat`` with its ``mtime``/``ctime`` compared as two ints.
Anything else — a changed data file, a sample that is not one store range, an id outside ``[0, n)``, another
query or dtype, a ``width`` — returns None and the general path answers (and re-arms the plan if the store is
still clean), so results and errors are those of the general path.

The call is one flat function (each Python frame, attribute chain or numpy call on a 1-element array costs
tens of nanoseconds, a tenth of the whole call here): the key is told apart by ``type`` (a Python int, a list of
one int, a 1-element int64 ``ndarray`` read with ``.item()``), a disarmed plan has no valid id (``limit`` 0), and a
row of ``seqlen`` tokens is one converting copy of a window of the store (a read-only strided view of every
``seqlen``-token window, made once: slicing it is cheaper than indexing the store with ``[None, s:s + L]``).

The fetch budget: the plan is armed only when one row fits the default budget, and a call with
``$CONSUMER_MAX_BATCH_BYTES`` set (looked up per call, as the general path does) goes the general way.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..sources.stat_snapshot import StatSnapshot
from .collate import torch_from_numpy
from .packed_rows import PackedRows

__all__ = ["OneRow"]

_INT64 = np.dtype(np.int64)
_BUDGET_ENV = "CONSUMER_MAX_BATCH_BYTES"
# CPython keeps ``os.environ``'s entries in a plain dict (bytes keys on POSIX) that every change of ``os.environ``
# updates: a lookup in it costs ~40 ns, ``in os.environ`` ~0.4 µs (key encoding and Mapping machinery)
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEY: object = os.environ.encodekey(_BUDGET_ENV) if hasattr(os.environ, "encodekey") else _BUDGET_ENV
_fstat = os.fstat
_NDARRAY = np.ndarray
_NP_INT64 = np.int64  # the one out_dtype this plan serves (compared by identity, as the general path's fast test)


class _Environ:
    """``$CONSUMER_MAX_BATCH_BYTES`` looked up through ``os.environ`` (where its plain dict is not to be had)."""

    def __contains__(self, key: object) -> bool:
        return _BUDGET_ENV in os.environ


class OneRow:
    """The plan of one dataset's single plain rows (see the module docstring): :meth:`row` or None."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.limit = 0  # n while armed: ids in [0, limit) are served; 0: none is
        self.packed: PackedRows | None = None
        # each sample's store position (-1: not one range) and token count as memoryviews (``ndarray.data``), whose
        # items are Python ints: cheaper to read than with ndarray.item
        self.start = self.length = np.zeros(0, dtype=np.int64).data
        self.tokens = np.zeros(0, dtype=np.int32)
        self.windows = np.zeros((0, 0), dtype=np.int32)  # [T - L + 1, L] read-only view: row s is tokens[s:s + L]
        self.seqlen = self.pad = self.itemsize = 0
        self.fd = -1  # -1: the general path compares no stamp either
        # the data file's struct stat as bytes at arming (None: os.fstat's mtime/ctime compared instead)
        self.stat = StatSnapshot(-1)
        self.stat_call, self.stat_local = self.stat.call, self.stat.local  # read per call: short attribute chains
        self.snapshot: bytes | None = None
        self.verifier: Any = None  # chunk sums: those of the row's chunks checked before it is served
        self.rows_seen = bytearray()  # PackedRows.rows_seen: 1 once a sample's chunks were found intact
        self.mtime = self.ctime = -1
        self.from_numpy: Any = None
        self.env: Any = _ENV_DATA if type(_ENV_DATA) is dict else _Environ()

    @property
    def armed(self) -> bool:
        """Rows are served by this plan (until a call finds the data file changed)."""
        return self.limit > 0

    def arm(self, packed: PackedRows) -> None:
        """Serve rows of ``packed`` from now on if the store is warm: every id block clean (or ids checked with the
        chunk sums), the data file still the version the clean marks were made for."""
        self.limit = 0
        if packed is not self.packed:
            self._bind(packed)
        p = packed
        self.verifier = p.store.verifier
        if self.verifier is not None:
            self.rows_seen = p.seen_rows()  # shared with the general path's batches of a few rows
        if not p.local:
            return
        if p.must_check:
            if not p.clean or p.stamp is None or self.fd < 0:
                return
            # taken before the look at the stamp: a change after it moves the ctime past the stamp (it is refused
            # here), a change after this look differs from the snapshot (the next call goes the general way)
            snapshot = self.stat.take()
            st = _fstat(self.fd)
            if st.st_size != p.stamp.size or max(st.st_mtime_ns, st.st_ctime_ns) != p.stamp.stamp:
                return
            self.mtime, self.ctime, self.snapshot = st.st_mtime_ns, st.st_ctime_ns, snapshot
        if self.from_numpy is None:
            self.from_numpy = torch_from_numpy()
        self.limit = self.n

    def _bind(self, packed: PackedRows) -> None:
        """Take what a call reads from the store's :class:`PackedRows`."""
        self.packed = packed
        self.start = np.ascontiguousarray(packed.start, dtype=np.int64).data
        length = packed.length  # int32 from the index (mapped from the cache): read as it is, not widened
        self.length = np.ascontiguousarray(length, dtype=length.dtype if length.dtype.isnative else np.int64).data
        self.seqlen = packed.seqlen
        self.tokens, self.pad = packed.tokens, packed.pad
        self.fd = packed._fd
        self.stat, self.snapshot = StatSnapshot(self.fd), None
        self.stat_call, self.stat_local = self.stat.call, self.stat.local
        self.itemsize = size = int(packed.tokens.itemsize)
        L, T = self.seqlen, int(packed.tokens.size) if packed.local else 0
        # a store shorter than one row has no row of seqlen tokens: no window is read
        self.windows = as_strided(self.tokens, shape=(max(T - L + 1, 0), L), strides=(size, size), writeable=False)

    def row(self, key: Any, query: object, mask: Any, out_dtype: object = np.int64,
            tensor: bool = True) -> dict[str, Any] | None:  # long: one flat function, see the module docstring
        """``{"input_array": [1, seqlen] int64 tensor}`` (numpy array if not ``tensor``) of the sample of a one-row
        ``key`` (a Python int, a list of one, a 1-element int64 array) in ``[0, n)`` of the default query (no CLS
        prefix, ``out_dtype`` numpy.int64), or None (the general path answers)."""
        kind = type(key)
        if kind is int:
            i = key
        elif kind is list:
            if len(key) != 1:
                return None
            i = key[0]
            if type(i) is not int:
                return None
        elif kind is _NDARRAY:
            if key.shape != (1,) or key.dtype is not _INT64:
                return None
            i = key.item()
        else:
            return None
        if not 0 <= i < self.limit or query is not None or out_dtype is not _NP_INT64 or mask.add_cls:
            return None
        # written since: the general path re-checks the store and re-arms this plan if it is still clean
        snapshot = self.snapshot
        if snapshot is not None:
            buffer = self.stat_local.buffer  # this thread's own
            if self.stat_call(self.fd, buffer) or buffer.raw != snapshot:
                self.limit = 0
                return None
        elif self.fd >= 0:
            st = _fstat(self.fd)
            if st.st_ctime_ns != self.ctime or st.st_mtime_ns != self.mtime:
                self.limit = 0
                return None
        if _ENV_KEY in self.env:  # the general path applies the budget
            return None
        s = self.start[i]
        if s < 0:
            return None
        n, L = self.length[i], self.seqlen
        verifier = self.verifier
        if verifier is not None:  # a FormatError on a mismatch, as the general path's, before a byte is served
            if not verifier.left:  # all verified, for good (a changed file disarms this plan; arm() looks again)
                self.verifier = None
            elif not self.rows_seen[i]:  # its chunks looked up here (ChunkVerifier's contract), checked if need be
                seen, t = verifier.seen, verifier.token_shift
                lo, hi = s >> t, (s + n - 1) >> t
                if hi - lo > 1 or not (seen[lo] and seen[hi]):
                    size = self.itemsize
                    verifier.check(self.tokens, s * size, (s + n) * size)
                self.rows_seen[i] = 1
        if n == L:  # one converting copy straight out of the store
            out = self.windows[s:s + 1].astype(_INT64)
        else:
            out = np.empty((1, L), dtype=_INT64)
            row = out[0]
            row[:n] = self.tokens[s:s + n]
            row[n:] = self.pad
        return {"input_array": self.from_numpy(out) if tensor else out}
