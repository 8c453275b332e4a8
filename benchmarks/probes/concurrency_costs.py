"""What the multi-process and changed-file checks cost one process alone: this tree against a baseline tree.

    git archive <rev> consumer | tar -x -C /tmp/base        # the code before, as a plain folder
    python -m benchmarks probe concurrency_costs --baseline /tmp/base [--rounds 3] [--files 4000]

Measured in child processes, the two trees interleaved round after round (so the machine's load falls on
both alike), best of each round's repeats:

- ``fetch diff``: a raw fetch of 20 small files (one sample each; the changed-file check is one more
  ``fstat`` per file after the read);
- ``fetch concat``: a raw fetch of 20 concat rows of 512 tokens over the same files;
- ``cold build``: ``Consumer(folder, cache_dir=<new>)`` over ``--files`` files (libmagic on every file,
  catalog rows written under work claims);
- ``content SQL``: the first ``SELECT sum(entropy) FROM files`` (the content pass over every file, under
  claims).

Prints one line per measure: baseline, this tree, and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

NAME = "concurrency_costs"
DESCRIPTION = "what the multi-process and changed-file checks cost one process, against a baseline tree"

_CHILD = r"""
import json, sys, tempfile, time
import numpy as np
from consumer import Consumer

data, files = sys.argv[1], int(sys.argv[2])

def best(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)

res = {}
diff = Consumer(data, cache_dir=False, metadata=None, seqlen=4096)
ids = np.arange(20)
diff.fetch_numpy(ids)
res["fetch diff (us)"] = best(lambda: diff.fetch_numpy(ids), 400) * 1e6
concat = Consumer(data, cache_dir=False, metadata=None, style="concat", seqlen=512)
cids = np.arange(20)
concat.fetch_numpy(cids)
res["fetch concat (us)"] = best(lambda: concat.fetch_numpy(cids), 400) * 1e6
builds, sqls = [], []
for _ in range(2):
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter(); ds = Consumer(data, cache_dir=cache); builds.append(time.perf_counter() - t)
        t = time.perf_counter(); ds.sql("SELECT sum(entropy) FROM files"); sqls.append(time.perf_counter() - t)
        ds.close()
res["cold build (s)"] = min(builds)
res["content SQL (s)"] = min(sqls)
print(json.dumps(res))
"""


def _write(root: Path, files: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    for i in range(files):
        folder = root / f"c{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.bin").write_bytes(rng.integers(0, 256, int(rng.integers(500, 4000)), dtype=np.uint8)
                                                .tobytes())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--baseline", default=None, help="a folder holding the baseline's consumer/ package "
                        "(required to run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=4000)


def run(args: argparse.Namespace) -> dict:
    """Run the comparison: per measure, the best and median of each tree and their ratio."""
    if not args.baseline:
        raise SystemExit("concurrency_costs needs --baseline FOLDER (see the module docstring)")
    here = str(Path(__file__).resolve().parents[2])
    trees = {"baseline": os.path.abspath(args.baseline), "this tree": here}
    got: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp) / "data", args.files)
        for _ in range(args.rounds):
            for name, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", _CHILD, str(Path(tmp) / "data"), str(args.files)],
                                     env=env, capture_output=True, text=True, check=True, cwd=tmp)
                for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items():
                    got[name].setdefault(k, []).append(v)
    rows = {}
    for k in got["baseline"]:
        a, b = min(got["baseline"][k]), min(got["this tree"][k])
        rows[k] = {"baseline_s": a, "this_tree_s": b, "ratio": b / a,
                   "baseline_median_s": statistics.median(got["baseline"][k]),
                   "this_tree_median_s": statistics.median(got["this tree"][k])}
    return {"rounds": args.rounds, "files": args.files, "measures": rows}
