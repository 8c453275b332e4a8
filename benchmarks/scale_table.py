"""Memory and per-file cost of the in-memory structures of a build at up to 10^7 files, without the files.

Run in a fresh process (``python -m benchmarks.scale_table N [CACHE_DIR]``), it prints one JSON line. The file
system and libmagic are left out — ``N`` synthetic paths (``/corpus/<class>/d<k>/f<i>.bin``, 8 classes) with
seeded sizes, mtimes and (device, inode) pairs stand in for a directory walk and its ``stat`` calls — and
everything else runs the code a ``Consumer(DIR, metadata=None)`` build runs, in the same order: the corpus of
the walk (``corpus_of_walk``, what ``normalise`` does with a directory), ``corpus.flat``, the file-table hash
and cache key, the headers, ``build_documents``, the sample index (``concat``, ``seqlen=2048``), the cache
entry's arrays (the packed path blob) and, with ``CACHE_DIR``, the entry written to disk and read back as a
warm reopen reads it. Reported: wall seconds per stage, peak RSS (``VmHWM``, this process's own, see
:func:`benchmarks.measure.peak_rss_mb`) after each stage, the RSS of the input list alone, and the resident
size of what a dataset keeps (corpus, document table, index).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time

import numpy as np

from benchmarks.measure import peak_rss_mb

CLASSES = 8


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def _peak_mb() -> float:
    return peak_rss_mb()  # VmHWM: this process's own peak, whatever its parent's


def synthetic_fps(n: int) -> dict[str, list[str]]:
    """``{class: [absolute paths]}`` of ``n`` files in ``CLASSES`` classes, 1,000 files per folder."""
    per = -(-n // CLASSES)
    return {f"class{c}": [f"/corpus/class{c}/d{i // 1000:05d}/f{i:08d}.bin"
                          for i in range(c * per, min(n, (c + 1) * per))] for c in range(CLASSES)}


def main(n: int, cache_dir: str | None) -> dict:
    """Run the stages on ``n`` synthetic files; the figures as a dict."""
    from consumer.catalog.headers import headers_from
    from consumer.dataset.cache import cache_key, file_table_sha256, load_entry, save_entry
    from consumer.sources.corpus import Corpus, corpus_of_walk
    from consumer.sources.local import LocalFiles
    from consumer.sources.paths import PathList
    from consumer.spec import Spec
    from consumer.tokens.documents import DOC_ARRAYS, build_documents
    from consumer.tokens.index import INDEX_ARRAYS
    from consumer.tokens.vocab import Vocab

    stages: dict[str, dict] = {}
    base = _rss_mb()
    t = time.perf_counter()

    def stage(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        stages[name] = {"s": now - t, "peak_mb": _peak_mb(), "rss_mb": _rss_mb()}
        t = time.perf_counter()

    fps = synthetic_fps(n)
    stage("input")
    input_mb = _rss_mb() - base
    corpus = corpus_of_walk(fps)  # what normalise does with the lists of a directory walk
    del fps
    stage("corpus")
    paths, cls_list = corpus.flat()
    cls = np.asarray(cls_list, dtype=np.int64)
    del cls_list
    rng = np.random.default_rng(n)
    sizes = rng.integers(256, 4096, n, dtype=np.int64)
    mtimes = np.full(n, 1_700_000_000_000_000_000, dtype=np.int64) + rng.integers(0, 10 ** 9, n)
    identity = np.stack([np.full(n, 2049, dtype=np.int64), rng.permutation(n) + 10 ** 6], axis=1)  # (device, inode)
    stage("flat + file table")
    spec = Spec(n_bytes=1, style="concat", seqlen=2048, metadata=None)
    key = cache_key({**spec.key_dict(), "classes": corpus.class_names,
                     "files_sha256": file_table_sha256(paths, cls, sizes, mtimes)})
    stage("file-table hash")
    headers = headers_from(None, paths, [], [])
    documents = build_documents(paths, cls, sizes, headers, Vocab(1), with_header=False, mtimes=mtimes,
                                source=LocalFiles(paths, sizes, mtimes, identity))
    del headers
    stage("documents")
    index = spec.sampling.build(documents.doc_len, documents.doc_class, len(corpus.classes), style=spec.style,
                                seqlen=spec.seqlen, long_files=spec.long_files, seed=spec.seed)
    stage("index")
    arrays = {**{k: getattr(documents, k) for k in DOC_ARRAYS}, **{k: getattr(index, k) for k in INDEX_ARRAYS},
              "paths": PathList.of(paths).packed()}
    stage("cache arrays")
    out: dict = {"files": n, "samples": len(index), "import_rss_mb": base, "input_list_mb": input_mb}
    if cache_dir:
        save_entry(cache_dir, key, arrays, {"spec": spec.key_dict(), "seqlen": index.seqlen, "headers": [""],
                                            "classes": corpus.class_names, "form": corpus.form, "files": n,
                                            "samples": len(index)})
        stage("cache write")
    del arrays, paths
    gc.collect()
    out["kept_rss_mb"] = _rss_mb() - base  # what the dataset keeps: corpus, documents, index
    if cache_dir:
        del corpus, documents, index
        gc.collect()
        t = time.perf_counter()
        entry = load_entry(cache_dir, key)
        assert entry is not None
        arrays2, desc = entry
        again = PathList.from_blob(arrays2["paths"])
        Corpus.of(desc["classes"], again, arrays2["doc_class"], desc["form"])
        stage("warm reopen (read entry, unpack paths, corpus)")
    total = sum(v["s"] for k, v in stages.items() if k != "input" and not k.startswith("warm"))
    reopen = stages.get("warm reopen (read entry, unpack paths, corpus)", {}).get("s")
    out.update({"stages": stages, "build_s": total, "reopen_s": reopen, "build_us_per_file": total / n * 1e6,
                "peak_rss_mb": _peak_mb()})
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)))
