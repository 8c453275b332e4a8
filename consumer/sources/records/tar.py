"""``documents="tar"``: each regular member of an (uncompressed) tar archive is a document, read in place by the byte
range of its data (an archive behind a URL is streamed once for its headers); its name shows as ``archive.tar/name``.
Headers are read with the standard library's ``tarfile`` (ustar, GNU and PAX: long names, non-UTF-8 names kept with
``surrogateescape``). Directories, links (hard and symbolic: no data of their own), devices, FIFOs and sparse members
are skipped and counted (``counts["skipped_members"]``).

A member whose data runs past the end of the archive is a bad record (a FormatError naming the archive, the member
and its byte offset; with ``on_bad_record="skip"`` skipped, and nothing after it is read). A damaged header is a
FormatError naming the archive, the member's number and byte offset, whatever ``on_bad_record`` says: ``tarfile``'s
own errors on hostile header values (a number or a sparse map that is not one, a charset that is not UTF-8, a seek
out of range: ``ValueError``, ``OverflowError``, ``IndexError``, ``TarError``, ``EOFError``) are turned into it; a
size below zero (a PAX ``size=-4096``, a negative base-256 size), which would send ``tarfile`` back to an earlier
header (for ever) or before the archive's start, is refused before the next header is read; and a header ``tarfile``
gives up on after the first member (it then reports the archive's end: a bad checksum, a header cut short, a PAX
record of length 0) is told apart from the end, which is a block of zeros or the end of the file."""

from __future__ import annotations

import tarfile
from typing import Any

import numpy as np

from ...errors import ConsumerError, FormatError
from .container import ChunkStream, Container
from .options import RecordOptions
from .scanned import BadRecords, DecodeSink, Scanned

__all__ = ["scan_tar"]

_HOSTILE = (ValueError, OverflowError, IndexError, EOFError, tarfile.TarError)  # tarfile's errors on bad headers
_HELD = 1 << 16  # bytes of a streamed archive held behind the reader (tarfile reads 10 KiB at a time)


def _damaged(path: str, k: int, at: int, why: str) -> FormatError:
    return FormatError(f"{path!r}: member {k} at byte {at}: damaged tar header: {why}")


def _why(e: BaseException) -> str:
    """A tarfile error, in words (its type where its message alone says little)."""
    if isinstance(e, EOFError):
        return f"the archive ends inside it ({e})"
    return str(e) or type(e).__name__ if isinstance(e, tarfile.TarError) else f"{type(e).__name__}: {e}"


def _not_the_end(tf: Any, source: Any, at: int) -> str | None:
    """Why the header at byte ``at``, where ``tarfile`` stopped, is not the archive's end (None: it is, a block of
    zeros or the end of the data; or its bytes are no longer held, streamed)."""
    if isinstance(source, ChunkStream):
        block = source.held(at, tarfile.BLOCKSIZE)
    else:
        tf.fileobj.seek(at)
        block = tf.fileobj.read(tarfile.BLOCKSIZE)
    if block is None or not block.strip(b"\0"):
        return None
    if len(block) < tarfile.BLOCKSIZE:
        return f"the archive ends inside it ({len(block)} of {tarfile.BLOCKSIZE} bytes)"
    try:
        tarfile.TarInfo.frombuf(block, tf.encoding, tf.errors)
    except tarfile.HeaderError as e:
        return f"not a tar header ({e})"
    except _HOSTILE as e:
        return f"not a tar header ({_why(e)})"
    return "its extended (PAX or GNU) header cannot be read"


def scan_tar(container: Container, options: RecordOptions, sink: DecodeSink) -> Scanned:
    """The regular members of ``container`` as documents (see the module docstring)."""
    path, size = container.path, container.size
    container.check()
    source: Any = container.local or path  # members are byte ranges of the archive ...
    mode = "r:"
    if container.local is None and not container.compressed:  # an object: its headers read in one streamed pass
        source, mode = ChunkStream(container.chunks(), keep=_HELD), "r|"
    elif container.compressed:  # ... or of its decompressed stream, kept in the decode cache
        for piece in container.chunks():
            sink.put(bytes(piece))
        size, source = sink.size, sink.reader()
    bad = BadRecords(path, options.on_bad_record == "skip")
    offs, lens, recs, names = [], [], [], []
    other, k, at = 0, 0, 0  # members read, and where the next one's header starts
    try:
        opener: Any = tarfile.open  # the mode is chosen at run time (the stubs type each mode literally)
        with opener(**({"name": source} if isinstance(source, str) else {"fileobj": source}), mode=mode,
                    errorlevel=2) as tf:
            while True:
                try:
                    m = tf.next()
                except tarfile.ReadError as e:
                    raise _damaged(path, k, at, str(e)) from None
                except _HOSTILE as e:
                    raise _damaged(path, k, at, _why(e)) from None
                if m is None:
                    why = _not_the_end(tf, source, tf.offset) if k else None  # at member 0 tarfile raises
                    if why is not None:
                        raise _damaged(path, k, tf.offset, why)
                    break
                if m.size < 0:  # tarfile would seek back to an earlier header (for ever), or before the start
                    raise _damaged(path, k, m.offset, f"member {m.name!r} has a size of {m.size} bytes (below zero)")
                if tf.offset < m.offset_data:  # an old GNU sparse header's own size below zero
                    raise _damaged(path, k, m.offset, f"member {m.name!r}: its header puts the next header at byte "
                                                      f"{tf.offset}, before its own data (byte {m.offset_data})")
                if m.isreg() and not m.issparse():
                    if m.offset_data + m.size > size:
                        bad.bad(f"member {m.name!r} is truncated: its {m.size} bytes run past the archive's end "
                                f"({size} bytes)", f"member {k}", m.offset)
                        break  # skipped (on_bad_record="skip"): the next header would lie past the end
                    if "\0" in m.name:
                        bad.bad(f"member name {m.name!r} holds a NUL byte", f"member {k}", m.offset)
                    else:
                        offs.append(m.offset_data)
                        lens.append(m.size)
                        recs.append(k)
                        names.append(m.name)
                else:
                    other += 1
                k += 1
                at = tf.offset
                tf.members = []  # headers are not kept: memory stays bounded by one member's header
    except ConsumerError:
        raise
    except tarfile.TarError as e:  # opening it: the first header
        raise FormatError(f"{path!r}: not a readable tar archive: {e}") from None
    except _HOSTILE as e:  # opening it: tarfile reads member 0's header then
        raise _damaged(path, k, at, _why(e)) from None
    finally:
        if container.compressed:
            source.close()
    container.check()
    return Scanned(offset=np.array(offs, dtype=np.int64), length=np.array(lens, dtype=np.int64),
                   record=np.array(recs, dtype=np.int64), inplace=np.full(len(offs), not container.compressed),
                   names=names,
                   counts={"skipped_members": other, "skipped_records": bad.skipped})
