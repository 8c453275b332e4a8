"""Three parts built three ways on real files in a temporary folder (all ``n_bytes=1``, ``seqlen=32``): raw files
(``diff``), a JSONL records dataset, and a packed store (small documents, several to a row)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer

SEQLEN = 32


def write_parts(root: Path, seed: int = 0) -> dict[str, Consumer]:
    """``{"raw": ..., "text": ..., "code": ...}`` over files written under ``root``."""
    rng = np.random.default_rng(seed)
    raw_dir, code_dir = root / "raw", root / "code"
    raw_dir.mkdir(parents=True)
    code_dir.mkdir()
    for i in range(12):
        (raw_dir / f"r{i:02d}.bin").write_bytes(bytes(rng.integers(0, 256, int(rng.integers(1, 60)), dtype=np.uint8)))
    for i in range(30):
        text = "".join(chr(c) for c in rng.integers(97, 123, int(rng.integers(2, 14))))
        (code_dir / f"c{i:02d}.py").write_text(f"x={text}\n")
    lines = [json.dumps({"text": f"doc {i} " + "y" * int(rng.integers(1, 50))}) for i in range(20)]
    (root / "t.jsonl").write_text("\n".join(lines) + "\n")
    raw = Consumer([str(p) for p in sorted(raw_dir.iterdir())], n_bytes=1, seqlen=SEQLEN)
    text = Consumer([str(root / "t.jsonl")], documents="jsonl", n_bytes=1, seqlen=SEQLEN)
    source = Consumer([str(p) for p in sorted(code_dir.iterdir())], n_bytes=1, seqlen=SEQLEN, metadata=None)
    source.pack(str(root / "store"))
    code = Consumer.from_packed(str(root / "store"), style="packed", seqlen=SEQLEN)
    return {"raw": raw, "text": text, "code": code}


@pytest.fixture(scope="package")
def parts(tmp_path_factory) -> dict[str, Consumer]:
    return write_parts(tmp_path_factory.mktemp("mix"))
