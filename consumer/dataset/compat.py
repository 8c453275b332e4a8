"""Datasets pickled by consumer 0.2 (flat modules) load into this layout (subpackages).

A pickle names the module of every class it holds (``consumer.ir.Corpus``, ``consumer.index.SampleIndex``, ...).
Release 0.2 kept every module directly under ``consumer/``; they now sit in subpackages. :func:`install` adds
one import hook (a finder after Python's own, so a real module always wins) that answers the old flat names
listed in :data:`MOVED` with the module that holds their classes now: ``import consumer.ir`` gives
``consumer.sources.corpus`` itself (the same module object, so ``isinstance`` holds). The names are not API;
they exist so that a ``Consumer`` pickled by 0.2 (a DataLoader worker's copy, a checkpoint) loads unchanged.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "consumer.validate": "consumer.util.validate", "consumer.seeds": "consumer.util.seeds",
    "consumer.progress": "consumer.util.progress", "consumer.fileio": "consumer.util.fileio",
    "consumer.pathlist": "consumer.sources.paths", "consumer.ir": "consumer.sources.corpus",
    "consumer.remote": "consumer.sources.urls", "consumer.remote_read": "consumer.sources.range_reader",
    "consumer.remote_requests": "consumer.sources.requests", "consumer.remote_plan": "consumer.sources.request_plan",
    "consumer.remote_cache": "consumer.sources.block_cache", "consumer.remote_cloud": "consumer.sources.cloud",
    "consumer.remote_meta": "consumer.sources.object_magic", "consumer.remote_tokens": "consumer.sources.remote_tokens",
    "consumer.filemeta": "consumer.sources.magic", "consumer.vocab": "consumer.tokens.vocab",
    "consumer.documents": "consumer.tokens.documents", "consumer.index": "consumer.tokens.index",
    "consumer.megatron_index": "consumer.tokens.megatron_index", "consumer.sampling": "consumer.tokens.sampling",
    "consumer.split": "consumer.tokens.split", "consumer.catalog_file": "consumer.catalog.file",
    "consumer.catalog_rows": "consumer.catalog.rows", "consumer.content": "consumer.catalog.content",
    "consumer.duplicates": "consumer.catalog.duplicates", "consumer.sql": "consumer.query.sqlite",
    "consumer.sqlfuncs": "consumer.query.functions", "consumer.dataset_sql": "consumer.query.session",
    "consumer.frames": "consumer.query.frames", "consumer.select": "consumer.fetch.select",
    "consumer.queries": "consumer.fetch.columns", "consumer.reader": "consumer.fetch.reader",
    "consumer.collate": "consumer.fetch.collate", "consumer.sampler": "consumer.training.sampler",
    "consumer.plan": "consumer.training.plan", "consumer.loader": "consumer.training.loader",
    "consumer.workers": "consumer.training.workers", "consumer.build": "consumer.dataset.build",
    "consumer.cache": "consumer.dataset.cache", "consumer.shared_build": "consumer.dataset.shared",
    "consumer.ranks": "consumer.dataset.ranks", "consumer.export": "consumer.dataset.export",
    "consumer.display": "consumer.dataset.display", "consumer.cli_commands": "consumer.cli.commands",
}
"""Old flat module name -> the module that holds its classes now. (``consumer.catalog``, ``consumer.fetch`` and
``consumer.cli`` are packages now: their classes are re-exported there.)"""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED` and loads them as their new modules."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old flat name, None for every other module."""
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module itself (imported if needed), so the old name and the new one are one object."""
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module was executed when it was imported."""


def install() -> None:
    """Add the finder of old flat names after Python's own finders (once per process)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.append(_MovedModules())
