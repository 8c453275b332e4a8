"""How the fixtures of this folder were made, with consumer 0.2.0 as it was before the subpackage move
(commit 48ca90d): pickles of datasets, an index cache entry and a catalog written by that release, which
the current release must still read (tests/dataset/test_compat_0_2.py). Kept as the record of what the files
hold; it imports module paths that no longer exist, so it only runs against that commit."""

from __future__ import annotations

import json
import pickle
import shutil
import sys
from pathlib import Path

ROOT = Path("/tmp/consumer-pickle-0.2.0")  # the absolute paths the pickles hold


def write_corpus(root: Path) -> Path:
    """The corpus the fixtures describe: two classes, deterministic bytes (also written by the test)."""
    corpus = root / "corpus"
    for c, n in (("alpha", 5), ("beta", 4)):
        (corpus / c).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            data = bytes((i * 37 + j * (3 if c == "alpha" else 5)) % 256 for j in range(100 + 61 * i))
            (corpus / c / f"f{i}.bin").write_bytes(data)
    return corpus


def main(out: Path) -> None:
    from consumer.cache import cache_key, file_table_sha256

    from consumer import Consumer

    shutil.rmtree(ROOT, ignore_errors=True)
    corpus = write_corpus(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    raw = Consumer(str(corpus), style="diff", seqlen=64, metadata=None, cache_dir=False)
    raw.create_batches(3, seed=1)
    raw[None]
    packed_src = Consumer(str(corpus), style="concat", seqlen=48, metadata=None, cache_dir=str(ROOT / "cache"))
    packed_src.pack(str(ROOT / "store" / "corpus"))
    store = Consumer.from_packed(str(ROOT / "store" / "corpus"), style="concat", seqlen=32)
    store.create_batches(4, seed=2)
    store.set_mlm_mode(0.2)
    store[None]
    sub = store.subset([0, 2, 5])
    cached = Consumer(str(corpus), style="diff", seqlen=40, metadata=None, cache_dir=str(ROOT / "cache"))
    pickles = {"raw_arrays": raw, "packed": store, "packed_subset": sub, "cached": cached}
    for name, ds in pickles.items():
        (out / f"{name}.pkl").write_bytes(pickle.dumps(ds))
    # the next batches each pickled dataset serves, and the expected cache key of a fixed file table
    store_next = {k: v.tolist() for k, v in store[None].items()}
    raw_next = {k: v.tolist() for k, v in raw[None, "supervised"].items()}
    key = cache_key({"probe": 1, "files_sha256": file_table_sha256(["/a/x", "/b/y"], [0, 1], [3, 4], [5, 6])})
    (out / "expected.json").write_text(json.dumps({"packed_next": store_next, "raw_next": raw_next,
                                                   "cached_key": cached.build_info["key"], "probe_key": key},
                                                  indent=1))
    entry = ROOT / "cache" / "index" / cached.build_info["key"]
    print(entry, entry.exists(), file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
