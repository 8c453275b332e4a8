"""Writers of container files for the records tests: the same documents as lines, JSONL, Parquet, tar, or exploded
one per file (zero-padded names: sorted order is record order)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_lines(path: Path, docs: list[bytes], final_newline: bool = True) -> Path:
    """Documents (non-empty, without ``\\n``) one per line."""
    path.write_bytes(b"\n".join(docs) + (b"\n" if final_newline else b""))
    return path


def write_jsonl(path: Path, texts: list[str], field: str = "text", extra: dict | None = None,
                ensure_ascii: bool = False) -> Path:
    """One JSON object per line with the text at ``field`` (dotted: nested) plus ``extra`` keys."""
    rows = []
    for t in texts:
        obj: dict = dict(extra or {})
        node = obj
        parts = field.split(".")
        for key in parts[:-1]:
            node = node.setdefault(key, {})
        node[parts[-1]] = t
        rows.append(json.dumps(obj, ensure_ascii=ensure_ascii))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8", errors="surrogatepass")
    return path


def write_parquet(path: Path, docs: list[bytes], row_group_size: int = 3, binary: bool = True, **columns) -> Path:
    """A Parquet file whose ``text`` column holds the documents (binary, or string when they are UTF-8)."""
    col = pa.array(docs, type=pa.binary()) if binary else pa.array([d.decode() for d in docs], type=pa.string())
    pq.write_table(pa.table({"text": col, **columns}), path, row_group_size=row_group_size)
    return path


def write_tar(path: Path, docs: list[bytes], fmt: int = tarfile.PAX_FORMAT, names: list[str] | None = None) -> Path:
    """A tar archive with one regular member per document (``m00000``, ... unless ``names``)."""
    with tarfile.open(path, "w", format=fmt) as tf:
        for i, d in enumerate(docs):
            info = tarfile.TarInfo(names[i] if names else f"m{i:05d}")
            info.size = len(d)
            tf.addfile(info, io.BytesIO(d))
    return path


def tar_bytes(members: list[tuple[str, bytes, dict[str, str]]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """An archive in memory: each member ``(name, data, PAX headers)``; a member named ``@pax`` is a PAX extended
    header whose records are its data, written as they are (for the member after it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data, pax in members:
            info = tarfile.TarInfo("././@PaxHeader" if name == "@pax" else name)
            if name == "@pax":
                info.type = tarfile.XHDTYPE
            info.size, info.pax_headers = len(data), pax
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pax_record(key: bytes, value: bytes) -> bytes:
    """One PAX record ``"<length> key=value\n"`` (the length counts itself)."""
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n)) + len(body) != n:
        n += 1
    return str(n).encode() + body


def patch_header(archive: bytes, at: int, field: slice, value: bytes) -> bytes:
    """``archive`` with bytes ``field`` of the header block at byte ``at`` replaced, its checksum made right again."""
    block = bytearray(archive[at:at + 512])
    block[field] = value
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return archive[:at] + bytes(block) + archive[at + 512:]


def write_exploded(folder: Path, docs: list[bytes]) -> list[str]:
    """Each document as its own file, in record order."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, d in enumerate(docs):
        p = folder / f"{i:06d}.doc"
        p.write_bytes(d)
        out.append(str(p))
    return out
