"""Modules imported on a thread while other work runs: :class:`Preload`.

A records build spends its time in C on its scanning threads (reads, Arrow's JSON reader), and the first SQL
statement after it starts by importing the query engine (DuckDB and the modules over it: about 0.08 s of one core
and 12 MB). Imported on a thread of its own while the containers are scanned, that time overlaps the scan instead
of following it. Python imports a module under that module's own lock, so an import of the same module by another
thread waits for this one to finish and never sees it half made; a module whose import fails is not kept, so the
caller's own import raises the error again where it is handled. The work that starts a preload joins it before it
returns: no thread of it is alive when the caller goes on (a fork then copies no import in progress).
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from types import TracebackType

__all__ = ["Preload"]


class Preload:
    """Import ``modules`` (dotted names, in order) on a thread; :meth:`join` (or leaving the ``with`` block) waits
    for it. Modules already imported cost nothing."""

    def __init__(self, modules: Sequence[str]) -> None:
        wanted = tuple(m for m in modules if m not in sys.modules)
        self._thread = threading.Thread(target=_import, args=(wanted,), name="consumer-preload", daemon=True) \
            if wanted else None
        if self._thread is not None:
            self._thread.start()

    def join(self) -> None:
        """Wait until the imports are done (or one of them failed)."""
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Preload:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.join()


def _import(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (not kept: the caller's own import raises it again, where it is handled)
            return
