"""Seeded benchmark corpora: folders of files whose sub-folders are classes, generated once and reused.

Three families, every one fully determined by ``(kind, n_files, seed)``:

- ``small``: files of 256 B .. 4 KB (uniform), 3 imbalanced classes (60 / 30 / 10 %): text-like
  ``.py``, random ``.bin``, ``.json`` (gperc's own benchmark workload, made imbalanced);
- ``lognormal``: log-normal sizes (median ~8 KB, capped at 4 MB), 6 imbalanced classes (Zipf-like
  weights), mixed text and binary content;
- ``band``: files whose sizes are uniform in one band ``[lo, hi]`` (the fetch-vs-file-size sweep),
  2 classes (75 / 25 %).

A corpus directory holds a ``.complete`` marker written last, so an interrupted generation is redone.
Content comes from a small seeded pool of text and random bytes (slices of it), so generation costs
one ``write`` per file and no per-byte Python work.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

import numpy as np

__all__ = ["CorpusInfo", "make_corpus", "corpus_dir"]

_TEXT = (b"def f(x, y):\n    return x * 2 + y  # a comment about the sum\n"
         b"class A:\n    value = [1, 2, 3]\n    name = 'alpha beta gamma'\n") * 40
_CLASS_SETS = {
    "small": (("py", 0.6), ("bin", 0.3), ("json", 0.1)),
    "lognormal": (("txt", 0.40), ("bin", 0.22), ("log", 0.15), ("csv", 0.11), ("dat", 0.08), ("xml", 0.04)),
    "band": (("txt", 0.75), ("bin", 0.25)),
}
_BINARY = {"bin", "dat"}
MAX_LOGNORMAL = 4 << 20


@dataclass(frozen=True)
class CorpusInfo:
    """A generated corpus: its folder, the files per class (F3 form, sorted) and totals."""

    root: str
    kind: str
    fps: dict[str, list[str]]
    n_files: int
    total_bytes: int

    @property
    def mean_file_bytes(self) -> float:
        """Average file size in bytes."""
        return self.total_bytes / max(self.n_files, 1)


def corpus_dir(data_root: str, kind: str, n_files: int, seed: int, band: tuple[int, int] | None = None) -> str:
    """The folder of one corpus under ``data_root`` (its name encodes every generation parameter)."""
    tag = f"{kind}_{n_files}_s{seed}" + (f"_{band[0]}-{band[1]}" if band else "")
    return os.path.join(data_root, tag)


def _sizes(kind: str, n_files: int, rng: np.random.Generator, band: tuple[int, int] | None) -> np.ndarray:
    if kind == "small":
        return rng.integers(256, 4097, n_files)
    if kind == "lognormal":
        return np.clip(rng.lognormal(mean=np.log(8192), sigma=1.6, size=n_files), 64, MAX_LOGNORMAL).astype(np.int64)
    if kind == "band":
        if band is None:
            raise ValueError("band corpora need band=(lo, hi)")
        return rng.integers(band[0], band[1] + 1, n_files)
    raise ValueError(f"kind must be one of {sorted(_CLASS_SETS)}, got {kind!r}")


def _listing(root: str) -> dict[str, list[str]]:
    """The files of a generated corpus per class folder, sorted."""
    out = {}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith("."):
            out[entry.name] = sorted(os.path.join(entry.path, f) for f in os.listdir(entry.path))
    return out


def make_corpus(data_root: str, kind: str, n_files: int, seed: int = 0,
                band: tuple[int, int] | None = None) -> CorpusInfo:
    """Generate (or reuse) the corpus ``(kind, n_files, seed[, band])`` under ``data_root``."""
    root = corpus_dir(data_root, kind, n_files, seed, band)
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            meta = json.load(f)
        return CorpusInfo(root=root, kind=kind, fps=_listing(root), n_files=meta["n_files"],
                          total_bytes=meta["total_bytes"])
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng([seed, n_files, len(kind)])
    classes = _CLASS_SETS[kind]
    names = [c for c, _ in classes]
    weights = np.array([w for _, w in classes])
    cls = rng.choice(len(names), size=n_files, p=weights / weights.sum())
    sizes = _sizes(kind, n_files, rng, band)
    pool_len = int(max(int(sizes.max()), 1) + 65536)
    random_pool = rng.integers(0, 256, pool_len, dtype=np.uint8).tobytes()
    text_pool = (_TEXT * (pool_len // len(_TEXT) + 1))[:pool_len]
    offsets = rng.integers(0, 65536, n_files)
    fps: dict[str, list[str]] = {c: [] for c in names}
    for c in names:
        os.makedirs(os.path.join(root, c), exist_ok=True)
    for i in range(n_files):
        c = names[int(cls[i])]
        n, o = int(sizes[i]), int(offsets[i])
        data = (random_pool if c in _BINARY else text_pool)[o:o + n]
        path = os.path.join(root, c, f"{i:07d}.{c}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        fps[c].append(path)
    fps = {c: sorted(p) for c, p in fps.items() if p}
    info = CorpusInfo(root=root, kind=kind, fps=fps, n_files=n_files, total_bytes=int(sizes.sum()))
    with open(marker, "w", encoding="utf-8") as f:
        json.dump({"n_files": n_files, "total_bytes": info.total_bytes}, f)
    return info
