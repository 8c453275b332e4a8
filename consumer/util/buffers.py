"""Large scratch buffers a scan reuses from chunk to chunk and from file to file: :func:`byte_buffer`,
:class:`Scratch`.

numpy asks the kernel for transparent huge pages on every array of 4 MiB or more (``madvise(MADV_HUGEPAGE)``).
Where the kernel's huge-page ``defrag`` setting is ``madvise`` (a common default), the first touch of such a fresh
array may stall in direct memory compaction when free memory is fragmented. A scan allocating a 16 MiB buffer per
container then costs a varying multiple of its work: indexing 64 JSONL shards (624 MB) took 2.2-2.5 s instead of
1.65 s in alternate processes. A buffer here is a ``bytearray`` (the C allocator, never marked for huge pages),
and a :class:`Scratch` keeps one per name for a thread's files: a fresh buffer per file is zeroed (holding the
GIL) or faulted in page by page (an anonymous map: 2x slower here), a kept one costs neither.
"""

from __future__ import annotations

import numpy as np

__all__ = ["byte_buffer", "Scratch"]


def byte_buffer(n: int) -> np.ndarray:
    """A writable uint8 array of ``n`` zero bytes backed by a ``bytearray`` (see the module docstring)."""
    if n < 0:
        raise ValueError(f"n: expected a byte count >= 0, got {n}")
    return np.frombuffer(bytearray(n), dtype=np.uint8)


class Scratch:
    """Named byte buffers that one thread reuses from file to file (each grown, by half at least, when a file needs
    more: a fresh buffer is zeroed page by page, 200 MB of first touches for 64 JSONL shards of slightly growing
    sizes when each grew to the exact size). A buffer handed out is the caller's until it asks for the same name
    again."""

    def __init__(self, at_least: int = 0) -> None:
        if at_least < 0:
            raise ValueError(f"at_least: expected a byte count >= 0, got {at_least}")
        self._buffers: dict[str, np.ndarray] = {}
        self._first = at_least

    def get(self, name: str, n: int) -> np.ndarray:
        """A writable uint8 array of ``n`` bytes (not zeroed: what the last user left) under ``name``. A name's
        first buffer has at least the ``at_least`` bytes the Scratch was made with: a scan that knows its largest
        piece makes each buffer once (a first buffer the size of a first, slightly smaller file, then a second one
        for the next file, touched 70 MB per thread instead of 28 MB for 32 JSONL shards of 9 MB)."""
        buf = self._buffers.get(name)
        if buf is None or buf.size < n:  # grown by half at least: files a little longer each are not each a new one
            buf = self._buffers[name] = byte_buffer(max(n, self._first) if buf is None
                                                    else max(n, buf.size + buf.size // 2))
        return buf[:n]
