"""One rank of a ``torch.distributed`` job building a dataset, for tests/dataset/test_shared_build.py.

Run as ``python -m tests.helpers.rank_worker RANK WORLD INIT_METHOD ENDPOINT FPS CACHE_DIR OUT [--no-share]``: joins the
gloo group, builds ``Consumer(FPS, ...)`` (``FPS`` a URL on the S3 endpoint, or a local directory when ENDPOINT
is ``-``) and pickles ``{"info", "warnings", "error", "ds"}`` to OUT.
"""

from __future__ import annotations

import pickle
import sys
import warnings


def main(argv: list[str]) -> None:
    rank, world, init, endpoint, fps, cache_dir, out = argv[:7]
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=init, rank=int(rank), world_size=int(world))
    from consumer import Consumer

    so = None if endpoint == "-" else {"endpoint_url": endpoint, "key": "test", "secret": "test"}
    result: dict = {"error": None, "ds": None, "info": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ds = Consumer(fps, storage_options=so, cache_dir=cache_dir, style="concat", seqlen=64,
                          distributed="--no-share" not in argv)
            result.update(ds=ds, info=ds.build_info)
        except Exception as e:  # noqa: BLE001  (reported to the test)
            result["error"] = f"{type(e).__name__}: {e}"
    result["warnings"] = [str(w.message) for w in caught]
    with open(out, "wb") as f:
        pickle.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
