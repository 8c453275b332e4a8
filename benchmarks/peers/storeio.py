"""Numpy-only access to the shared inputs of the peers: the Megatron ``.bin/.idx`` store and a sample plan.

Every peer converts the *same tokens* (the documents ``consumer`` packed into a Megatron-LM store) into its
own format. What a sample is comes from a *plan*: ``plan.npz`` with ``start`` / ``length`` (int64, one
entry per sample: the sample's tokens are ``tokens[start:start + length]`` of the store, contiguous for
both styles the peers serve) plus ``seqlen`` and ``pad`` (rows are padded with ``pad`` up to ``seqlen``).
This module imports nothing but numpy so it loads in every peer's virtual environment. It also holds
:func:`import_skipping_init`, how the adapters import a library whose package ``__init__`` pulls in what
its needed submodule does not need.
"""

from __future__ import annotations

import importlib
import importlib.util
import struct
import sys
import types

import numpy as np

__all__ = ["read_store", "Plan", "load_plan", "save_plan", "pad_rows", "import_skipping_init"]

_MAGIC = b"MMIDIDX\x00\x00"
_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}


def import_skipping_init(package: str, submodule: str, missing: str) -> types.ModuleType:
    """``package.submodule`` imported without running ``package/__init__.py`` (an empty stand-in package takes
    its place); ImportError ``missing`` when the package is not installed."""
    name = f"{package}.{submodule}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(missing)
    if package not in sys.modules:
        stand_in = types.ModuleType(package)
        stand_in.__path__ = list(spec.submodule_search_locations)
        sys.modules[package] = stand_in
    return importlib.import_module(name)


def read_store(prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """The token array (memory-mapped ``prefix.bin``) and the token offset of every document (``[D+1]``)
    of a Megatron-core ``MMIDIDX`` store (one sequence per document)."""
    with open(prefix + ".idx", "rb") as f:
        head = f.read(34)
        if head[:9] != _MAGIC:
            raise ValueError(f"{prefix}.idx: not an MMIDIDX index (magic {head[:9]!r})")
        (version,) = struct.unpack("<Q", head[9:17])
        code = head[17]
        n_seq, _n_doc = struct.unpack("<QQ", head[18:34])
        if version != 1 or code not in _CODES:
            raise ValueError(f"{prefix}.idx: unsupported version {version} or dtype code {code}")
        lengths = np.frombuffer(f.read(4 * n_seq), dtype=np.int32).astype(np.int64)
    tokens = np.memmap(prefix + ".bin", dtype=_CODES[code], mode="r")
    offsets = np.zeros(n_seq + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return tokens, offsets


class Plan:
    """Samples as contiguous token ranges of the store, and the row width and PAD id."""

    def __init__(self, start: np.ndarray, length: np.ndarray, seqlen: int, pad: int):
        self.start = np.asarray(start, dtype=np.int64)
        self.length = np.asarray(length, dtype=np.int64)
        self.seqlen = int(seqlen)
        self.pad = int(pad)

    def __len__(self) -> int:
        return int(self.start.size)

    def row(self, tokens: np.ndarray, i: int) -> np.ndarray:
        """The unpadded tokens of sample ``i`` (a view of the store)."""
        s = int(self.start[i])
        return tokens[s:s + int(self.length[i])]


def save_plan(path: str, plan: Plan) -> None:
    """Write a plan to ``path`` (``.npz``)."""
    np.savez(path, start=plan.start, length=plan.length, seqlen=plan.seqlen, pad=plan.pad)


def load_plan(path: str) -> Plan:
    """Read a plan written by :func:`save_plan`."""
    z = np.load(path)
    return Plan(z["start"], z["length"], int(z["seqlen"]), int(z["pad"]))


def pad_rows(rows: list, seqlen: int, pad: int) -> np.ndarray:
    """Collate variable-length rows (arrays or tensors) into a ``[B, seqlen]`` int64 batch padded with ``pad``:
    the collate function every peer's loop needs (one slice copy per row)."""
    out = np.full((len(rows), seqlen), pad, dtype=np.int64)
    for r, row in enumerate(rows):
        a = row.numpy() if hasattr(row, "numpy") and not isinstance(row, np.ndarray) else np.asarray(row)
        out[r, :a.shape[0]] = a
    return out
