"""examples/train_mixture.py run as a user would (a subprocess, a short run): a code + JSONL text + packed store
mixture with a weight schedule serves each part's share within one sample of the schedule before and after the
switch, a loader resumed from ``state_dict()`` serves the run's next batches, and the model learns on every part."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "train_mixture.py"


def _shares(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+)", text)}


def test_mixture_example_holds_the_schedule_and_resumes(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["--steps", "30", "--switch", "15", "--max-files", "100", "--eval-rows", "32", "--work", str(tmp_path)]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], check=False, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "mixture checks: passed" in out
    before = _shares(re.search(r"proportions over steps 0-14: (.*)", out).group(1))
    after = _shares(re.search(r"proportions over steps 15-29: (.*)", out).group(1))
    # 15 steps of 16 rows: 240 rows per window, each part within one sample of its weight's share
    for shares, weights in ((before, {"code": 0.5, "text": 0.3, "store": 0.2}),
                            (after, {"code": 0.2, "text": 0.55, "store": 0.25})):
        assert set(shares) == set(weights), out
        assert all(abs(shares[p] - w) <= 1 / 240 + 1e-3 for p, w in weights.items()), out
    assert re.search(r"largest distance of a part's cumulative count from its target over all 30 steps: "
                     r"0\.\d+ samples", out), out
    assert "the next 6 batches are the same as the run's" in out
    bits = {p: tuple(map(float, re.search(rf"held-out {p}\s*: bits/byte ([0-9.]+) -> ([0-9.]+)", out).groups()))
            for p in ("code", "text", "store")}
    assert all(start > 7.0 and end < start - 1.0 for start, end in bits.values()), out
    assert (tmp_path / "docstrings_train.jsonl").exists() and (tmp_path / "store_train.idx").exists()
