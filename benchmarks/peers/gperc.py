"""gperc 0.7's ``Consumer`` (``gperc/data.py``), loaded without ``gperc/__init__.py``.

gperc 0.7 cannot be installed with its own pins on Python >= 3.10 and its ``__init__`` imports its model
code and ``datasets``; the data engine itself needs only numpy, torch, tqdm and ``gperc/utils.py``. So
this adapter registers a bare ``gperc`` package module pointing at the installed folder and imports
``gperc.data`` from it. gperc needs the ``file`` command (it spawns it per file at build and fetch time).

Rows are *not* comparable with ``consumer``'s: gperc's header is ``file``'s output *with the path*, its
concat windows lose and repeat bytes; only shapes are checked.
"""

from __future__ import annotations

import numpy as np

from .storeio import import_skipping_init

__all__ = ["Adapter", "version"]


def _load():
    return import_skipping_init("gperc", "data", "gperc is not installed (pip install --no-deps gperc==0.7)")


def version() -> dict:
    """gperc's version (from its distribution metadata) after checking that ``gperc.data`` imports."""
    from importlib.metadata import version as dist_version

    _load()
    return {"version": dist_version("gperc")}


class Adapter:
    """gperc's Consumer over the corpus ``fps`` (F3 ``{class: [paths]}``)."""

    variants = ("default",)

    def __init__(self, fps: dict, style: str, n_bytes: int, seqlen: int):
        self.args = {"fps": fps, "style": style, "n_bytes": n_bytes, "seqlen": seqlen}
        self.ds = None

    def convert(self) -> dict:
        """Build gperc's Consumer (its whole set-up: one ``file`` run per class, stat of every file)."""
        data = _load()
        self.ds = data.Consumer(self.args["fps"], n_bytes=self.args["n_bytes"], seqlen=self.args["seqlen"],
                                style=self.args["style"], verbose=False)
        return {"samples": len(self.ds)}

    def fetch(self, ids: np.ndarray, variant: str):
        """``ds[[i, ...]]`` (gperc's I3 form): a dict of int64 tensors."""
        return self.ds[[int(i) for i in ids]]

    def loader(self, variant: str, batch_size: int, workers: int, seed: int):
        """gperc has no loader of its own."""
        raise NotImplementedError("gperc 0.7 has no data loader")
