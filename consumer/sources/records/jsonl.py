"""``documents="jsonl"``: each non-blank line is a JSON object; the document is the UTF-8 of the string at
``text_field`` (a dotted path such as ``meta.text`` reaches into nested objects). An empty string is an empty
document. Blank lines (only spaces, tabs, ``\\r``) are skipped and counted. Lines end at 0x0A only (U+2028, U+2029
and NEL inside strings are text), and a ``\\r`` before the ``\\n`` is JSON whitespace.

A chunk of lines (16 MiB) is parsed in three tiers, each only where the one before refuses the chunk:
Arrow's JSON reader (:mod:`.jsonl_arrow`: C++ outside the GIL, an explicit schema of the wanted fields, the texts
as one UTF-8 buffer); msgspec's typed decoder (a struct holding only the wanted fields, so other fields are
skipped in C), one call per chunk: the chunk's lines are joined into one JSON array in place (numpy writes the
``[``, the commas and the ``]`` over the newlines; blank lines become whitespace) and decoded at once, the text
field as :class:`msgspec.Raw` (its JSON, not a ``str``), the raw strings joined and turned into UTF-8 by numpy
(:mod:`.json_strings`); and line by line, only for a chunk holding a bad record (or an over-long line), to name
or skip the record. Chunks may be parsed on several threads (``threads``), results in order. The whole scanner
runs at several hundred MB/s per core on records of 200-2000 bytes (docs/benchmarks.md,
``python -m benchmarks probe records_index --kind jsonl``).

The decoded text has no byte range in the container (escapes). In a plain container the document is the text
of its record's line, decoded again whenever it is read (:class:`~.source.RecordFiles`): the index keeps the line's
byte range (the SQL ``json`` column) and the text's decoded length, and nothing else is written, so a corpus is not
stored twice. In a compressed container (no byte ranges) each chunk's texts and lines go to the decode cache.

Bad records (invalid JSON, not an object, the field missing or not a string, a UTF-8 BOM, text that is not UTF-8
or not valid Unicode, a line over :data:`MAX_RECORD_BYTES`, arrays and objects nested deeper than
:data:`MAX_JSON_DEPTH`: see :mod:`.json_depth`) raise a FormatError naming the file, the line and its byte offset,
or are skipped and counted with ``on_bad_record="skip"``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...util.buffers import byte_buffer
from .container import SCAN_CHUNK, Container, append_piece, indexed_lines
from .json_depth import fresh_stack, records_too_deep, too_deep, why_too_deep
from .json_strings import strings_to_utf8
from .jsonl_arrow import ArrowLines
from .jsonl_decoders import finite_record, import_msgspec, record_decoder, why_bad
from .options import RecordOptions
from .scanned import INT32_MAX, BadRecords, ClassTable, DecodeSink, Scanned

__all__ = ["scan_jsonl", "msgspec_block"]

_BLANK = b" \t\r\n"


def _blocks(container: Container) -> Iterator[tuple[np.ndarray, int, np.ndarray, np.ndarray]]:
    """Complete lines of ``container`` a chunk at a time, in one reused buffer (no new allocation per chunk):
    ``(work, base, starts, ends)`` where line ``k`` is ``work[1 + starts[k]:1 + ends[k]]`` (no ``\\n``) and starts at
    byte ``base + starts[k]`` of the container. ``work[0]`` and the bytes after each line are free for the caller
    (the fast path writes ``[``, commas and ``]`` there). Only 0x0A ends a line; the last line may lack one."""
    cap = min(SCAN_CHUNK, max(container.size, 1))  # a small file's size (the buffers grow for a bigger piece)
    # buffers of the scan, reused from chunk to chunk; a file of several chunks carries a line's start over to the
    # next chunk: room for two chunks from the start (else a second buffer, and its pages touched, at chunk two)
    work = container.buffer("work", (cap if container.size <= cap else 2 * cap) + 2)
    n, base = 0, 0  # work[1:1 + n] holds the container's bytes from base on (a line not ended yet)
    for piece in container.chunks():
        m = len(piece)
        work = append_piece(work, n, piece)
        newline = container.buffer("newline", m).view(np.bool_)
        np.equal(work[1 + n:1 + n + m], 10, out=newline)
        nl = np.flatnonzero(newline).astype(np.int64, copy=False)  # intp: int64 here, no copy
        if n:
            nl += n  # the carried bytes hold no newline
        n += m
        if nl.size:
            starts = np.empty(nl.size, dtype=np.int64)
            starts[0] = 0
            np.add(nl[:-1], 1, out=starts[1:])
            yield work, base, starts, nl
            cut = int(nl[-1]) + 1
            work[1:1 + n - cut] = work[1 + cut:1 + n].copy()
            base, n = base + cut, n - cut
    if n:
        yield work, base, np.zeros(1, dtype=np.int64), np.array([n], dtype=np.int64)


class _Chunk:
    """The documents of one chunk of lines: UTF-8 texts, their lines (start, end, 0-based number), classes."""

    def __init__(self) -> None:
        self.texts: list[bytes] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.records: list[int] = []
        self.classes: list[str] = []
        self.arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # starts, ends, records (fast path)
        self.pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None  # fast paths: (data, at, n)

    def put(self, sink: DecodeSink | None) -> tuple[np.ndarray, np.ndarray]:
        """Write the texts to ``sink`` (one write a piece): their offsets there and their byte lengths; with no
        ``sink`` (texts decoded from their lines when read) offsets 0 and the lengths."""
        if sink is None:
            ns = [n for _, _, n in self.pieces or []]
            n = (ns[0] if len(ns) == 1 else np.concatenate(ns)) if ns else \
                np.fromiter(map(len, self.texts), dtype=np.int64, count=len(self.texts))
            return np.zeros(n.size, dtype=np.int64), n.astype(np.int64, copy=False)
        if self.pieces is None:
            return sink.put_many(self.texts)
        ats, ns = [], []
        for data, at, n in self.pieces:
            if n.size:
                lo, hi = int(at[0]), int(at[-1] + n[-1])  # from the first text's first byte to the last one's end
                ats.append(at + (sink.put(data[lo:hi], owned=True) - lo))  # a fresh array: kept, not copied
                ns.append(n)
        if not ats:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(ats), np.concatenate(ns)

    def __bool__(self) -> bool:
        return bool(self.texts) or (self.pieces is not None and any(n.size for _, _, n in self.pieces))

    def lines(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Starts, ends and numbers of the documents' lines."""
        if self.arrays is not None:
            return self.arrays
        return (np.array(self.starts, dtype=np.int64), np.array(self.ends, dtype=np.int64),
                np.array(self.records, dtype=np.int64))


def _blank_lines(work: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which lines of the block are blank (empty, or only spaces, tabs and ``\\r``): the empty ones by their length,
    the others among the few lines that do not start with ``{`` (a record with leading whitespace, or a bad one)."""
    blank: np.ndarray = np.asarray(ends == starts)
    maybe = np.flatnonzero(~blank & (work[1 + np.minimum(starts, ends - 1)] != 0x7B))
    for k in maybe.tolist():
        blank[k] = not bytes(work.data[1 + int(starts[k]):1 + int(ends[k])]).strip(_BLANK)
    return blank


def _fast(work: np.ndarray, base: int, starts: np.ndarray, ends: np.ndarray, first: int, decoders: _Decoders,
          out: _Chunk) -> int | None:
    """Every line of the block at once: parsed by Arrow's JSON reader (:class:`.jsonl_arrow.ArrowLines`), or where
    Arrow refuses the block, by msgspec: the lines joined into one JSON array in place (``[`` before the first, a
    comma after each record but the last, every other newline a space, ``]`` after the last line: numpy steps) and
    decoded in one call. The number of blank lines (passed over), or None (nothing added) when a line is too long
    or bad, or nests deeper than :data:`MAX_JSON_DEPTH` (Arrow's reader takes any depth, msgspec's reads do not:
    checked once parsed, :func:`.json_depth.records_too_deep`): the caller then reads the block line by line."""
    from . import options as limits  # noqa: PLC0415  (read at call time: tests lower the limit)

    lens = ends - starts
    if not lens.size or int(lens.max()) > limits.MAX_RECORD_BYTES:
        return None
    blank = _blank_lines(work, starts, ends)
    kept: Any = np.flatnonzero(~blank) if blank.any() else slice(None)  # the records' lines
    numbers = np.arange(first, first + lens.size, dtype=np.int64)
    lines = (starts[kept] + base, ends[kept] + base, numbers[kept])
    parsed = None
    if decoders.arrow is not None and lines[0].size and not bool((work[1 + starts[kept]] != 0x7B).any()):
        parsed = decoders.arrow.texts(work.data[1:1 + int(ends[-1])], int(lines[0].size), int(lens.max()))
    if parsed is None:
        parsed = msgspec_block(work, ends, kept, decoders.many, decoders.take)
        if parsed is None:
            return None
    texts = [n for _, _, n in parsed[0]]
    if records_too_deep(work[1:1 + int(ends[-1])], starts[kept], ends[kept],
                        texts[0] if len(texts) == 1 else np.concatenate(texts), limits.MAX_JSON_DEPTH):
        return None
    out.pieces, classes = parsed
    out.arrays = lines
    if classes is not None:
        out.classes = classes
    return int(np.count_nonzero(blank))


def msgspec_block(work: np.ndarray, ends: np.ndarray, kept: Any, many: Any, take: Any,
                  ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[str] | None] | None:
    """The block's records decoded by msgspec's array decoder ``many`` in one call (see :func:`_fast`; ``take`` of
    :func:`record_decoder`): the texts as one piece, the classes; None when a record is bad. Line ``k`` is
    ``work[1 + starts[k]:1 + ends[k]]``, each followed by one free byte (the newline), ``work[0]`` free: the
    brackets and commas are written there."""
    work[0] = 0x5B  # [
    if isinstance(kept, slice):
        work[1 + ends[:-1]] = 0x2C  # each newline a comma
    else:
        work[1 + ends[:-1]] = 0x20  # newlines are whitespace, but the one after each record followed by another
        work[1 + ends[kept[:-1]]] = 0x2C  # record: a comma
    last = 1 + int(ends[-1])
    work[last] = 0x5D  # ]
    try:
        raws, classes = take(many(work.data[:last + 1]))
    except Exception:  # noqa: BLE001  (msgspec's errors: the line-by-line pass names the line)
        return None
    if len(raws) != (ends.size if isinstance(kept, slice) else kept.size):  # a line of two objects with a comma
        return None
    n = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    at = np.zeros(n.size, dtype=np.int64)
    np.cumsum(n[:-1], out=at[1:])
    joined = strings_to_utf8(np.frombuffer(bytearray().join(raws), dtype=np.uint8), at, at + n)  # writable
    if joined is None:  # not a string, an unpaired surrogate, not UTF-8: the line-by-line pass names the line
        return None
    return [joined], classes


@dataclass(frozen=True)
class _Decoders:
    """The block decoders of one scan: Arrow's reader (None: msgspec only), msgspec's array decoder, ``take``."""

    arrow: ArrowLines | None
    many: Any
    take: Any


def _decoded_blocks(container: Container, decoders: _Decoders, threads: int,
                    ) -> Iterator[tuple[np.ndarray, int, np.ndarray, np.ndarray, int, _Chunk, int | None]]:
    """Each block of lines with its one-call decode (:func:`_fast`), in order: ``(work, base, starts, ends,
    first line number, chunk, blank lines or None)``. With ``threads`` > 1 each block is copied out of the read
    buffer and decoded on a pool of that many threads (at most ``threads + 1`` blocks in flight, so memory stays a
    few blocks), while the next blocks are read and split into lines: one big container uses several cores. The
    copies go to buffers reused from block to block (a fresh 16 MiB buffer per block is 4,096 pages touched for the
    first time: 19,000 of the 67,000 page faults of a 298 MB file scanned on two threads)."""
    blocks = _blocks(container) if container.lines is None else indexed_lines(container)
    first = 0
    if threads <= 1:
        for work, base, starts, ends in blocks:
            got = _Chunk()
            yield work, base, starts, ends, first, got, _fast(work, base, starts, ends, first, decoders, got)
            first += starts.size
        return
    pending: collections.deque[tuple[Any, ...]] = collections.deque()
    spare: list[np.ndarray] = []  # buffers of blocks already handed on (each is free once the caller asks again)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="consumer-jsonl") as pool:
        try:
            for work, base, starts, ends in blocks:
                need = 2 + int(ends[-1])  # the block's lines and the bytes _fast writes around them
                fits = [k for k, b in enumerate(spare) if b.size >= need]
                own = spare.pop(fits[0]) if fits else byte_buffer(max(need, min(work.size, SCAN_CHUNK + 2)))
                own[:need] = work[:need]
                got = _Chunk()
                pending.append((own, base, starts, ends, first, got,
                                pool.submit(_fast, own, base, starts, ends, first, decoders, got)))
                first += starts.size
                if len(pending) > threads:
                    *head, done = pending.popleft()
                    yield (*head, done.result())
                    spare.append(head[0])
            while pending:
                *head, done = pending.popleft()
                yield (*head, done.result())
                spare.append(head[0])
        finally:
            for *_, waiting in pending:
                waiting.cancel()


def _line_by_line(work: np.ndarray, base: int, starts: np.ndarray, ends: np.ndarray, line_no: int, got: Any,
                  bad: BadRecords, decoding: tuple[Any, Any, Any], options: RecordOptions) -> int:
    """A block the fast tiers refused, read a line at a time into ``got`` (each bad line reported to ``bad`` by its
    number and offset); the number of blank lines passed over."""
    from . import options as limits  # noqa: PLC0415  (read at call time: tests lower the limit)

    decode, take, errors = decoding
    blank = 0
    buf = work.data[1:]
    measured = np.where(ends - starts > limits.MAX_RECORD_BYTES, starts, ends)  # not an over-long line
    deep = too_deep(work[1:1 + int(ends[-1])], starts, measured, limits.MAX_JSON_DEPTH)
    for k, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
        line_no += 1
        if b - a > limits.MAX_RECORD_BYTES:
            bad.bad(f"a line of {b - a} bytes is longer than the limit of {limits.MAX_RECORD_BYTES} bytes",
                    f"line {line_no}", a + base)
            continue
        if k in deep:
            bad.bad(why_too_deep(deep[k]), f"line {line_no}", a + base)
            continue
        try:
            try:
                texts, labels = take([fresh_stack(decode, buf[a:b])])
            except errors:  # NaN or Infinity in a field (Python's json writes them): read as null, else bad
                finite = finite_record(bytes(buf[a:b]))
                if finite is None:
                    raise
                texts, labels = take([fresh_stack(decode, finite)])
            data = texts[0].encode("utf-8")
        except RecursionError:  # within the limit, yet too deep for msgspec even on a fresh thread
            bad.bad(why_too_deep(None), f"line {line_no}", a + base)
            continue
        except errors as e:
            line = bytes(buf[a:b])
            if not line.strip(_BLANK):
                blank += 1
                continue
            bad.bad(why_bad(line, e, options), f"line {line_no}", a + base)
            continue
        except UnicodeEncodeError:
            bad.bad(f"the field {options.text_field!r} holds an unpaired surrogate escape (\\ud800-\\udfff): "
                    "not Unicode text", f"line {line_no}", a + base)
            continue
        except UnicodeDecodeError as e:  # msgspec's, for bytes of a string that are not UTF-8
            bad.bad(f"the field {options.text_field!r} is not UTF-8 text ({e.reason}: byte "
                    f"0x{e.object[e.start]:02x})", f"line {line_no}", a + base)
            continue
        got.texts.append(data)
        got.starts.append(a + base)
        got.ends.append(b + base)
        got.records.append(line_no - 1)
        if labels is not None:
            got.classes.extend(labels)
    return blank


def scan_jsonl(container: Container, options: RecordOptions, sink: DecodeSink, threads: int = 1) -> Scanned:
    """The JSON records of ``container`` as documents (see the module docstring); ``threads`` > 1 decodes its
    blocks on that many threads (:func:`_decoded_blocks`), with the same result."""

    msgspec = import_msgspec()
    one, many, take = record_decoder(options)
    decode, errors = one.decode, (msgspec.DecodeError, msgspec.ValidationError)
    bad = BadRecords(container.path, options.on_bad_record == "skip")
    offs: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    recs: list[np.ndarray] = []
    jo: list[np.ndarray] = []
    jl: list[np.ndarray] = []
    table, codes = ClassTable(), []  # class values as int32 codes, a chunk at a time
    # every offset, length and line number of a file under 2 GiB fits int32 (a decoded text is never longer than
    # its JSON); a decompressed stream's size is not known: int64
    kind = np.int32 if not container.compressed and container.size <= INT32_MAX else np.int64
    blank = 0
    keep = container.compressed  # the texts into the decode cache; else decoded from their lines when read
    decoders = _Decoders(ArrowLines(options, keep=keep), many.decode, take)
    for work, base, starts, ends, line_no, got, blanks in _decoded_blocks(container, decoders, threads):
        if blanks is not None:
            blank += blanks
        else:
            blank += _line_by_line(work, base, starts, ends, line_no, got, bad, (decode, take, errors), options)
        if got:
            at, n = got.put(sink if keep else None)
            line_starts, line_ends, numbers = got.lines()
            if container.compressed:  # the block's lines into the decode cache too, in one piece (the json column)
                lo, hi = int(line_starts[0]) - base, int(line_ends[-1]) - base
                shift = sink.put(work.data[1 + lo:1 + hi]) - (lo + base)
                line_starts, line_ends = line_starts + shift, line_ends + shift
            for parts, a in ((offs, at), (lens, n), (recs, numbers), (jo, line_starts), (jl, line_ends - line_starts)):
                parts.append(a.astype(kind, copy=False))  # 4 bytes a record while the container is scanned
            if options.class_field:
                codes.append(table.add(got.classes))
    def cat(xs: list[np.ndarray]) -> np.ndarray:
        got = np.concatenate(xs) if xs else np.zeros(0, kind)
        xs.clear()  # the chunks' parts go as soon as they are joined
        return got

    offset = cat(offs)
    return Scanned(offset=offset, length=cat(lens), record=cat(recs), inplace=np.zeros(offset.size, dtype=bool),
                   class_names=table.names if options.class_field else None,
                   class_codes=(np.concatenate(codes) if codes else np.zeros(0, np.int32)) if options.class_field
                   else None,
                   json_offset=cat(jo), json_length=cat(jl), from_lines=not keep,
                   counts={"blank_lines": blank, "skipped_records": bad.skipped,
                           "raw_index": int(container.lines is not None)})
