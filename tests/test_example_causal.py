"""examples/train_causal_bytes.py run as a user would (a subprocess, a short run): it learns, below the unigram
baseline, and its held-out figure is the same through FlexAttention block masks as through the SDPA mask."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "train_causal_bytes.py"


def test_causal_byte_model_ends_below_the_unigram_baseline(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # a short run: 40 steps of 16 x 256 bytes already end well below the order-0 baseline (its exit status checks it)
    args = ["--steps", "40", "--eval-rows", "128", "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], check=False, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    start, end, unigram = map(float, re.search(r"val bits/byte ([0-9.]+) -> ([0-9.]+) \(unigram ([0-9.]+)\): below",
                                               out).groups())
    assert start > 7.0  # an untrained model: about log2(vocabulary)
    assert end < unigram < start, out
    first, last = map(float, re.search(r"train bits/byte ([0-9.]+) -> ([0-9.]+)", out).groups())
    assert last < first - 1.0, out
    flex = re.search(r"through FlexAttention block masks: ([0-9.]+) bits/byte \(SDPA mask: ([0-9.]+)\)", out)
    if flex:  # CPU with FlexAttention: the two forms of the document mask give the same figure
        a, b = map(float, flex.groups())
        assert abs(a - b) < 1e-3, out
