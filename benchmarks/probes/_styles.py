"""Helpers of the style and objective probes (``objective_costs``, ``style_fetch``, ``style_report``): a generated
corpus packed into a warm Megatron store, interleaved timing of several readers on the same ids, and the
padding / cut-document figures of an index.
"""

from __future__ import annotations

import glob
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..corpora import CorpusInfo, make_corpus
from ..measure import median

__all__ = ["warm_store", "read_through", "warm_rows", "interleaved", "back_to_back", "summary", "index_figures"]


def warm_store(work: str, kind: str, n_files: int, *, n_bytes: int = 2, seqlen: int = 8192,
               band: tuple[int, int] | None = None, data_root: str | None = None) -> tuple[CorpusInfo, str]:
    """The generated corpus ``(kind, n_files[, band])`` and the prefix of a Megatron store of it (``ds.pack``),
    written under ``work`` once (the store's files read through, so they sit in the page cache)."""
    info = make_corpus(data_root or os.path.join(work, "data"), kind, n_files, band=band)
    tag = os.path.basename(info.root)
    prefix = os.path.join(work, f"store_{tag}_b{n_bytes}")
    if not os.path.exists(prefix + ".idx"):
        from consumer import Consumer

        t0 = time.perf_counter()
        ds = Consumer(info.root, n_bytes=n_bytes, style="concat", seqlen=seqlen, cache_dir=os.path.join(work, "cache"))
        ds.pack(prefix)
        print(f"store {prefix}: built and packed in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    read_through(glob.glob(prefix + "*"))
    return info, prefix


def read_through(paths: list[str]) -> int:
    """Read every byte of ``paths`` (into the page cache); the bytes read."""
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(1 << 24):
                total += len(chunk)
    return total


def warm_rows(ds: Any, batch: int = 64) -> None:
    """Fetch every row of ``ds`` once (plain query): pages touched, chunk sums found intact, readers made."""
    for i in range(0, len(ds), batch):
        ds.fetch_numpy(np.arange(i, min(i + batch, len(ds)), dtype=np.int64), None)


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved(cases: dict[str, Callable[[np.ndarray], Any]], batches: list[np.ndarray], warmup: int = 3
                ) -> dict[str, dict[str, list[float]]]:
    """Every case on every batch (the same ids for all cases of a repetition), the cases' order rotated from one
    repetition to the next; per case the seconds and the minor page faults of each call."""
    names = list(cases)
    for ids in batches[:warmup]:
        for name in names:
            cases[name](ids)
    out: dict[str, dict[str, list[float]]] = {n: {"seconds": [], "faults": []} for n in names}
    for r, ids in enumerate(batches):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            f0 = _minflt()
            t0 = time.perf_counter()
            cases[name](ids)
            t1 = time.perf_counter()
            out[name]["seconds"].append(t1 - t0)
            out[name]["faults"].append(float(_minflt() - f0))
    return out


def back_to_back(cases: dict[str, Callable[[np.ndarray], Any]], batches: list[np.ndarray], warmup: int = 3
                 ) -> dict[str, dict[str, list[float]]]:
    """Each case on every batch in a run of its own (as a training loop calls one query step after step), the cases
    one after the other; per case the seconds and the minor page faults of each call (warm-up calls left out)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, fn in cases.items():
        for ids in batches[:warmup]:
            fn(ids)
        t = out[name] = {"seconds": [], "faults": []}
        for ids in batches:
            f0 = _minflt()
            t0 = time.perf_counter()
            fn(ids)
            t1 = time.perf_counter()
            t["seconds"].append(t1 - t0)
            t["faults"].append(float(_minflt() - f0))
    return out


def summary(times: dict[str, dict[str, list[float]]], base: str) -> dict[str, dict[str, float]]:
    """Per case: median and best µs, minor faults per call, and the ratio to case ``base`` (the median of the
    per-repetition ratios, paired on the same ids, and the ratio of the best calls)."""
    b = np.asarray(times[base]["seconds"])
    out = {}
    for name, t in times.items():
        s = np.asarray(t["seconds"])
        out[name] = {"median_us": median(s) * 1e6, "best_us": float(s.min()) * 1e6,
                     "faults_per_call": median(t["faults"]), "ratio": median(s / b),
                     "ratio_best": float(s.min() / b.min())}
    return out


def index_figures(ds: Any) -> dict[str, float]:
    """Padding %, documents cut % (a document is cut unless one row holds it whole: a segment from its token 0 of
    its full length), tokens left out % (truncation), rows per epoch, documents, and documents longer than a row %."""
    index, doc_len = ds.index, np.asarray(ds.documents.doc_len, dtype=np.int64)
    n_docs = int(doc_len.size)
    seg_doc = np.asarray(index.seg_doc, dtype=np.int64)
    whole_seg = (np.asarray(index.seg_start) == 0) & (np.asarray(index.seg_len, dtype=np.int64) == doc_len[seg_doc])
    whole = np.zeros(n_docs, dtype=bool)
    whole[seg_doc[whole_seg]] = True
    served = int(np.asarray(index.seg_len, dtype=np.int64).sum())
    rows = len(ds)
    return {"rows": rows, "documents": n_docs, "tokens": int(doc_len.sum()),
            "padding_pct": 100.0 * (1.0 - served / (rows * index.seqlen)) if rows else 0.0,
            "cut_pct": 100.0 * (n_docs - int(whole.sum())) / max(n_docs, 1),
            "tokens_left_out_pct": 100.0 * (1.0 - served / max(int(doc_len.sum()), 1)),
            "longer_than_row_pct": 100.0 * float((doc_len > index.seqlen).mean()) if n_docs else 0.0}
