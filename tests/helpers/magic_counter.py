"""Count real libmagic calls by wrapping python-magic's ``Magic.from_file`` and ``Magic.from_descriptor`` (the
library calls :func:`consumer.sources.magic.describe_files` makes), each recorded as the path it described: the
path given, or the file an open descriptor points to (``/proc/self/fd``; a symlink's target, as libmagic sees it)."""

from __future__ import annotations

import os
from collections.abc import Callable


def wrap_libmagic(record: Callable[[str], object]) -> Callable[[], None]:
    """Make every ``Magic.from_file`` / ``Magic.from_descriptor`` call ``record(path)`` first; returns the undo."""
    import magic

    from_file, from_descriptor = magic.Magic.from_file, magic.Magic.from_descriptor

    def counted_file(self, path):
        record(os.fspath(path))
        return from_file(self, path)

    def counted_descriptor(self, fd):
        record(os.readlink(f"/proc/self/fd/{fd}"))
        return from_descriptor(self, fd)

    magic.Magic.from_file, magic.Magic.from_descriptor = counted_file, counted_descriptor

    def undo() -> None:
        magic.Magic.from_file, magic.Magic.from_descriptor = from_file, from_descriptor

    return undo
