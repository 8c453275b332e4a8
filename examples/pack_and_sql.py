"""Catalog, SQL and packed stores: select files with SQL, pack them for Megatron, serve from the pack.

Run: python examples/pack_and_sql.py
"""

import os
import tempfile

import numpy as np

from consumer import Consumer


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        for cls, ext in (("text", "txt"), ("binary", "bin")):
            os.makedirs(os.path.join(data, cls))
            for i in range(20):
                with open(os.path.join(data, cls, f"f{i:02d}.{ext}"), "wb") as f:
                    f.write(b"line %d\n" % i * (i + 1) if cls == "text" else os.urandom(50 * i + 7))

        cache = os.path.join(work, "cache")
        ds = Consumer(data, style="concat", seqlen=256, cache_dir=cache)
        print(ds, ds.build_info["cache"], "libmagic calls:", ds.build_info["libmagic_calls"])
        again = Consumer(data, style="concat", seqlen=256, cache_dir=cache)
        print("reopened:", again.build_info["cache"], "libmagic calls:", again.build_info["libmagic_calls"])

        for row in ds.sql("SELECT class, mime, count(*) AS files, sum(size) AS bytes FROM files "
                          "GROUP BY class, mime ORDER BY class"):
            print("  ", row)
        small = ds.where("size < 500")
        print("files under 500 bytes:", len(small.files), small.samples_per_class())

        prefix = os.path.join(work, "packed", "corpus")
        summary = ds.pack(prefix, format="megatron")
        print(f"packed {summary['documents']} documents, {summary['tokens']} tokens ({summary['dtype']})")
        packed = Consumer.from_packed(prefix, style="concat", seqlen=256)
        ids = np.arange(len(ds))
        same = np.array_equal(packed.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])
        print("packed store serves the same tokens as the files:", same)
        assert same
        print(packed[{"text": 2, "binary": 2}, "supervised"]["class"].tolist())


if __name__ == "__main__":
    main()
