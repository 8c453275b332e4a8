"""The exception tree of ``consumer``: one module, one place to look.

Every error the engine raises on purpose is a :class:`ConsumerError` and also inherits the builtin
exception a caller would naturally catch, so ``except KeyError`` keeps working for code written
against plain Python containers::

    ConsumerError(Exception)
     ├── InputError(ValueError)          bad constructor arguments, bad files, bad paths
     │    └── StorageFullError           a write ran out of space or hit a file-size limit (path, bytes needed)
     ├── SelectionError(KeyError)        unknown class, asking a class for more samples than it has
     ├── SampleIndexError(IndexError)    a sample index out of range
     ├── QueryError(ValueError)          unknown query preset or column, bad mode settings
     ├── FormatError(ValueError)         a file on disk that does not follow its format's spec
     ├── FileChangedError(OSError)       a source file changed between build and read
     ├── RemoteError(OSError)            object storage kept failing (5xx, timeouts) after every retry
     ├── MissingDependencyError(ImportError)  an optional dependency (or libmagic) is missing
     └── WorkerError(RuntimeError)       a loader worker process died, timed out or broke the batch layout

    ConsumerWarning(UserWarning)         a setting that works but is probably not what was meant
                                         (e.g. ``seqlen="auto"`` padding most of every batch)

Every message names the argument and echoes the bad value (see ``docs/design.md``).
"""

from __future__ import annotations

__all__ = [
    "ConsumerError",
    "InputError",
    "StorageFullError",
    "SelectionError",
    "SampleIndexError",
    "QueryError",
    "FormatError",
    "FileChangedError",
    "RemoteError",
    "MissingDependencyError",
    "WorkerError",
    "ConsumerWarning",
    "short_repr",
]


class ConsumerError(Exception):
    """Base class of every error ``consumer`` raises on purpose."""


class InputError(ConsumerError, ValueError):
    """A constructor argument, a path or a file is not acceptable."""


class StorageFullError(InputError):
    """A write ran out of room: no space left (``ENOSPC``), a disk quota (``EDQUOT``) or a file-size limit
    (``EFBIG``, ``RLIMIT_FSIZE``). The message names the path and the bytes needed; nothing partial is left
    and what was there before is kept (see ``consumer.util.fileio.space_error``)."""


class SelectionError(ConsumerError, KeyError):
    """A selection names an unknown class or asks a class for more samples than it has."""

    def __str__(self) -> str:  # KeyError would repr() the message and add quotes
        return str(self.args[0]) if self.args else ""


class SampleIndexError(ConsumerError, IndexError):
    """A sample index is outside ``range(-len(ds), len(ds))``."""


class QueryError(ConsumerError, ValueError):
    """A query names an unknown preset or column, or its settings are invalid."""


class FormatError(ConsumerError, ValueError):
    """A file does not follow the byte layout of its format (expected vs actual in the message)."""


class FileChangedError(ConsumerError, OSError):
    """A source file no longer matches what was recorded when the index was built."""


class RemoteError(ConsumerError, OSError):
    """A remote source kept failing with transient errors (5xx, timeouts, dropped connections) after every retry."""


class MissingDependencyError(ConsumerError, ImportError):
    """A dependency (python package or system library) needed for this feature is not installed."""


class WorkerError(ConsumerError, RuntimeError):
    """A loader worker process died, timed out, or raised an exception that cannot be re-raised as itself."""


class ConsumerWarning(UserWarning):
    """A setting that works but is probably not what was meant; the message says what to choose instead."""


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for echoing bad values in error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
