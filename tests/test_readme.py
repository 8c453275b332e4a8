"""The README's quick start runs as written, in a fresh process, on a small corpus in a temporary folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import write_corpus

ROOT = Path(__file__).resolve().parent.parent


def quick_start() -> str:
    """The first python block after the README's "## Quick start" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block in the quick start"
    return match.group(1)


def test_quick_start_runs(tmp_path):
    sizes = {"code": [120, 5000, 33, 2048, 9000], "data": [7, 64, 65, 4097, 30000], "notes": [1, 2, 3]}
    write_corpus(tmp_path / "corpus", sizes)
    script = tmp_path / "quick_start.py"
    # the library's own warnings become errors: the quick start must use settings a user can keep
    script.write_text("import warnings\nfrom consumer.errors import ConsumerWarning\n"
                      "warnings.simplefilter('error', ConsumerWarning)\n" + quick_start(), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONSUMER_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Consumer(style='diff', n_bytes=2, seqlen=2048")
    assert "['code', 'data', 'notes']" in res.stdout and '"files_sha256"' in res.stdout
    assert f"('code', 5, {sum(sizes['code'])})" in res.stdout  # the SQL result row of class code
    assert (tmp_path / "packed" / "corpus.bin").is_file() and (tmp_path / "packed" / "corpus.idx").is_file()


def test_the_next_byte_block_runs(tmp_path):
    """The README's next-byte pretraining block runs as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if '"causal"' in b)
    write_corpus(tmp_path / "corpus", {"code": [120, 5000, 33, 2048, 9000], "data": [7, 64, 65, 4097, 30000]})
    script = tmp_path / "next_byte.py"
    script.write_text("from consumer import Consumer\n" + block +
                      "print(sorted(batch), tuple(batch['labels'].shape), len(list(loader)))\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CONSUMER_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert "['document_ids', 'input_array', 'labels', 'position_ids'] (8, 2048)" in res.stdout
