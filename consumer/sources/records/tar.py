"""``documents="tar"``: each regular member of an (uncompressed) tar archive is a document, read in place by the byte
range of its data (an archive behind a URL is streamed once for its headers); its name shows as ``archive.tar/name``.
Headers are read with the standard library's ``tarfile`` (ustar, GNU and PAX: long names, non-UTF-8 names kept with
``surrogateescape``). Directories, links (hard and symbolic: no data of their own), devices, FIFOs and sparse members
are skipped and counted (``counts["skipped_members"]``). A member whose data runs past the end of the archive, or a
damaged header, is a FormatError naming the archive, the member and its byte offset."""

from __future__ import annotations

import tarfile
from typing import Any

import numpy as np

from ...errors import FormatError
from .container import ChunkStream, Container
from .options import RecordOptions
from .scanned import BadRecords, DecodeSink, Scanned

__all__ = ["scan_tar"]


def scan_tar(container: Container, options: RecordOptions, sink: DecodeSink) -> Scanned:
    """The regular members of ``container`` as documents (see the module docstring)."""
    path, size = container.path, container.size
    container.check()
    source: Any = container.local or path  # members are byte ranges of the archive ...
    mode = "r:"
    if container.local is None and not container.compressed:  # an object: its headers read in one streamed pass
        source, mode = ChunkStream(container.chunks()), "r|"
    elif container.compressed:  # ... or of its decompressed stream, kept in the decode cache
        for piece in container.chunks():
            sink.put(bytes(piece))
        size, source = sink.size, sink.reader()
    bad = BadRecords(path, options.on_bad_record == "skip")
    offs, lens, recs, names = [], [], [], []
    other, k = 0, 0
    try:
        opener: Any = tarfile.open  # the mode is chosen at run time (the stubs type each mode literally)
        with opener(**({"name": source} if isinstance(source, str) else {"fileobj": source}), mode=mode,
                    errorlevel=2) as tf:
            while True:
                try:
                    m = tf.next()
                except tarfile.ReadError as e:
                    raise FormatError(f"{path!r}: damaged tar header after member {k} (near byte {tf.offset}): "
                                      f"{e}") from None
                if m is None:
                    break
                if m.isreg() and not m.issparse():
                    if m.offset_data + m.size > size:
                        bad.bad(f"member {m.name!r} is truncated: its {m.size} bytes run past the archive's end "
                                f"({size} bytes)", f"member {k}", m.offset)
                    elif "\0" in m.name:
                        bad.bad(f"member name {m.name!r} holds a NUL byte", f"member {k}", m.offset)
                    else:
                        offs.append(m.offset_data)
                        lens.append(m.size)
                        recs.append(k)
                        names.append(m.name)
                else:
                    other += 1
                k += 1
                tf.members = []  # headers are not kept: memory stays bounded by one member's header
    except tarfile.TarError as e:
        raise FormatError(f"{path!r}: not a readable tar archive: {e}") from None
    except EOFError as e:
        raise FormatError(f"{path!r}: the archive ends inside member {k}'s header: {e}") from None
    finally:
        if container.compressed:
            source.close()
    container.check()
    return Scanned(offset=np.array(offs, dtype=np.int64), length=np.array(lens, dtype=np.int64),
                   record=np.array(recs, dtype=np.int64), inplace=np.full(len(offs), not container.compressed),
                   names=names,
                   counts={"skipped_members": other, "skipped_records": bad.skipped})
