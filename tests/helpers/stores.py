"""Packed stores as earlier versions wrote them, for the tests that open old stores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def as_format_1_table(prefix: str) -> None:
    """Rewrite the store's file table as versions before 0.9 wrote it (a compressed .npz of the paths blob and the
    three per-document arrays, no ``path_at``), and its size in the sidecar."""
    table = Path(prefix + ".consumer.npz")
    with np.load(table) as z:
        arrays = {k: z[k] for k in ("paths", "doc_class", "doc_size", "doc_header")}
    table.unlink()
    np.savez_compressed(table, **arrays)
    side_path = Path(prefix + ".consumer.json")
    side = json.loads(side_path.read_text())
    side["files"]["table"]["size"] = table.stat().st_size
    side_path.write_text(json.dumps(side))
