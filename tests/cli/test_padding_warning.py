"""The padding warning of ``seqlen='auto'`` comes where rows are made: ``consumer sql``, ``info``, ``index`` and
``pack`` on a folder of very unequal files make no rows and print none; ``consumer demo``, which serves a batch,
prints it once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import write_corpus

ROOT = Path(__file__).resolve().parents[2]
MIXED = {"small": [10, 12, 30, 40, 25], "big": [20000, 15, 35]}  # one long file sets the width of every row


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mixed")
    write_corpus(root / "data", MIXED)
    return root


def _run(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONSUMER_CACHE_DIR": str(root / "cache")}
    return subprocess.run([sys.executable, "-m", "consumer", *argv], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("argv", [
    ("sql", "{data}", "SELECT count(*) FROM files"),
    ("info", "{data}", "--quiet"),
    ("index", "{data}", "--quiet"),
    ("pack", "{data}", "{out}"),
])
def test_commands_that_make_no_rows_print_no_padding_warning(mixed, argv):
    args = [a.format(data=mixed / "data", out=mixed / "out" / argv[0]) for a in argv]
    res = _run(mixed, *args)
    assert res.returncode == 0, res.stderr
    assert "of every row is PAD" not in res.stderr and "warning" not in res.stderr


def test_a_command_that_makes_rows_warns_once(mixed):
    res = _run(mixed, "demo", "--dir", str(mixed / "data"), "--seqlen", "auto")
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if "of every row is PAD" in line]
    assert len(lines) == 1 and lines[0].startswith("consumer: warning: seqlen='auto' resolved to ")
