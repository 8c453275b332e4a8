"""The training examples, run as a user would (subprocesses, small sizes): they learn, and resume exactly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], check=False, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_classifier_learns_and_resumes_from_its_checkpoint(tmp_path):
    ckpt = str(tmp_path / "ckpt.pt")
    small = ["--small", "--quiet", "--checkpoint", ckpt, "--save-every", "4", "--workers", "2"]
    first = _run("train_classifier.py", *small, "--stop-after", "8")
    assert "stopped after 8 steps at epoch 1, batch 3" in first  # 5 batches per epoch at the small size
    second = _run("train_classifier.py", *small, "--resume", "--workers", "0")
    assert "resumed at epoch 1, batch 3 of 5" in second
    acc = float(re.search(r"held-out accuracy: ([0-9.]+) over (\d+) files \(3 classes", second).group(1))
    assert acc >= 0.8, second  # chance is 1/3: python sources, bytecode and shared libraries
    trained = int(re.search(r"trained (\d+) steps", second).group(1))
    assert trained == 3 * 5 - 8  # the resumed run only did the steps the first one had not


def test_masked_byte_pretraining_lowers_the_loss():
    out = _run("pretrain_mlm.py", "--small", "--quiet", "--steps", "40")
    first, last = map(float, re.search(r"masked-byte loss ([0-9.]+) -> ([0-9.]+)", out).groups())
    assert first > 5.0 and last < first - 0.7, out


def test_classifier_data_parallel_under_torchrun():
    """The documented DDP command line: two CPU ranks (gloo), each its own shard, the same held-out accuracy."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(EXAMPLES / "train_classifier.py"), "--small", "--quiet", "--workers", "0"],
                          check=False, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "data parallel over 2 ranks, 3 batches of 32 per rank and epoch" in out  # 144 samples / (2 x 32)
    assert out.count("held-out accuracy:") == 1  # only rank 0 reports
    acc = float(re.search(r"held-out accuracy: ([0-9.]+) over 36 files", out).group(1))
    assert acc >= 0.8, out


def test_train_from_jsonl_learns_the_labels():
    """examples/train_from_jsonl.py writes its JSONL, reads it with documents="jsonl" and learns the labels."""
    out = subprocess.run([sys.executable, str(EXAMPLES / "train_from_jsonl.py"), "--records", "900", "--epochs", "1"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    accuracy = float(out.split("held-out accuracy: ")[1].split()[0])
    assert accuracy > 0.8, out
