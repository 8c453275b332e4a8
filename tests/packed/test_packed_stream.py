"""Packing in bounded pieces: a document longer than the chunk is read and written piece by piece.

The writers append to the current sequence / document (``IndexedWriter.extend_item``,
``PbinWriter.extend_document``) with byte-identical output; a pack with any chunk size is byte for byte
the pack with one huge chunk; packing (and merging) a sparse file of hundreds of MiB keeps the peak
resident set far below the document's size as int64 tokens.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, open_packed
from consumer.errors import InputError
from consumer.formats.mmidx import FAIRSEQ, MEGATRON, IndexedWriter
from consumer.formats.pbin import PbinWriter, write_pbin
from consumer.packed.write import chunk_segments

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}
STORE_SUFFIXES = (".bin", ".idx", ".pbin", ".consumer.npz", ".consumer.json")


def _split(doc: np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    """``doc`` cut at the given positions (taken modulo its length + 1, sorted): at least one piece."""
    at = sorted({c % (doc.size + 1) for c in cuts})
    return np.split(doc, at) if at else [doc]


docs_and_cuts = st.lists(st.tuples(st.integers(0, 40), st.lists(st.integers(0, 1000), max_size=4)),
                         min_size=1, max_size=6)


# ------------------------------------------------------------------------------------------ writers


@pytest.mark.parametrize("flavour,multimodal", [(MEGATRON, False), (MEGATRON, True), (FAIRSEQ, False)])
@settings(max_examples=60, **SETTINGS)
@given(spec=docs_and_cuts)
def test_index_writer_in_pieces_is_byte_identical(tmp_path_factory, flavour: str, multimodal: bool, spec) -> None:
    root = tmp_path_factory.mktemp("w")
    docs = [(np.arange(n, dtype=np.int64) * 7 + k) % 60000 for k, (n, _) in enumerate(spec)]
    with IndexedWriter(root / "whole", np.uint16, flavour=flavour, multimodal=multimodal) as w:
        for k, doc in enumerate(docs):
            w.add_item(doc, mode=k % 3)
            w.end_document()
    with IndexedWriter(root / "parts", np.uint16, flavour=flavour, multimodal=multimodal) as w:
        for k, (doc, (_, cuts)) in enumerate(zip(docs, spec)):
            first, *rest = _split(doc, cuts)
            w.add_item(first, mode=k % 3)
            for piece in rest:
                w.extend_item(piece)
            w.end_document()
    for suffix in (".bin", ".idx"):
        assert (root / f"parts{suffix}").read_bytes() == (root / f"whole{suffix}").read_bytes()


@settings(max_examples=60, **SETTINGS)
@given(spec=docs_and_cuts, width=st.sampled_from([1, 2, 4]))
def test_pbin_writer_in_pieces_is_byte_identical(tmp_path_factory, spec, width: int) -> None:
    root = tmp_path_factory.mktemp("p")
    docs = [(np.arange(n, dtype=np.int64) * 7 + k) % 250 for k, (n, _) in enumerate(spec)]
    write_pbin(root / "whole.pbin", docs, width)
    with PbinWriter(root / "parts.pbin", width) as w:
        for doc, (_, cuts) in zip(docs, spec):
            first, *rest = _split(doc, cuts)
            w.add_document(first)
            for piece in rest:
                w.extend_document(piece)
    assert (root / "parts.pbin").read_bytes() == (root / "whole.pbin").read_bytes()


def test_extending_needs_an_open_sequence(tmp_path: Path) -> None:
    with IndexedWriter(tmp_path / "a", np.uint16) as w:
        with pytest.raises(InputError, match="extend_item: no sequence to extend"):
            w.extend_item([1, 2])
        w.add_item([1])
        w.end_document()
        with pytest.raises(InputError, match="extend_item: no sequence to extend"):  # the document is ended
            w.extend_item([3])
        w.add_item([4])
        with pytest.raises(InputError, match="token ids must fit"):
            w.extend_item([70000])
        w.extend_item([5])
        w.end_document()
    assert (tmp_path / "a.bin").read_bytes() == np.array([1, 4, 5], dtype="<u2").tobytes()
    with PbinWriter(tmp_path / "b.pbin", 2) as p:
        with pytest.raises(InputError, match="extend_document: no document to extend"):
            p.extend_document([1])
        with pytest.raises(InputError, match=r"documents\[0\]: token ids must be in \[0, 65535\]"):
            p.add_document([-1])
        p.add_document([])
        p.extend_document([7, 8])
    assert (tmp_path / "b.pbin").read_bytes() == (write_pbin(tmp_path / "c.pbin", [[7, 8]], 2) and
                                                  (tmp_path / "c.pbin").read_bytes())


def test_a_failed_pbin_writer_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with PbinWriter(tmp_path / "x.pbin", 2) as p:
            p.add_document([1, 2])
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []
    with pytest.raises(InputError, match="is aborted"):
        p.add_document([1])


# ------------------------------------------------------------------------------------------ chunking


@settings(max_examples=300, **SETTINGS)
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=12), chunk=st.integers(1, 40))
def test_chunks_cover_every_token_once_in_order(lengths: list[int], chunk: int) -> None:
    doc_len = np.array(lengths, dtype=np.int64)
    seen: list[tuple[int, int]] = []  # (document, token) in stream order
    firsts = []
    for d, a, n, first in chunk_segments(doc_len, chunk):
        assert int(n.sum()) <= chunk and np.all(n >= 0) and np.all(np.diff(d) == 1)
        firsts.extend(d[first].tolist())
        for dd, aa, nn in zip(d.tolist(), a.tolist(), n.tolist()):
            seen.extend((dd, t) for t in range(aa, aa + nn))
            assert aa == 0 or not first[d.tolist().index(dd)]
    assert seen == [(d, t) for d, n in enumerate(lengths) for t in range(n)]
    assert firsts == list(range(len(lengths)))  # every document starts exactly once, in order


# ------------------------------------------------------------------------------------------ pack


@settings(max_examples=60, **SETTINGS)
@given(sizes=st.lists(st.integers(0, 60), min_size=1, max_size=5), n_bytes=st.sampled_from([1, 2, 3]),
       chunk=st.integers(1, 45), header=st.integers(0, 9))
def test_pack_with_any_chunk_size_is_byte_identical(sizes: list[int], n_bytes: int, chunk: int, header: int) -> None:
    """Tiny chunks cut documents everywhere (inside headers, at SEP, TAIL and EOF): the store files,
    table and sidecar (its content checksum included) are those of one chunk holding everything."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        for i, size in enumerate(sizes):
            p = root / "src" / f"c{i % 2}" / f"f{i}.bin"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(bytes((i * 31 + k * 7) % 256 for k in range(size)))
            paths.append(str(p))
        ds = Consumer(str(root / "src"), n_bytes=n_bytes, seqlen=16, cache_dir=False,
                      metadata=(lambda path: "h" * (header + len(path) % 3)) if header else None)
        for fmt in ("megatron", "modalities"):
            ds.pack(str(root / f"{fmt}-whole"), format=fmt, chunk_tokens=1 << 30)
            ds.pack(str(root / f"{fmt}-tiny"), format=fmt, chunk_tokens=chunk)
            for suffix in STORE_SUFFIXES:
                whole, tiny = root / f"{fmt}-whole{suffix}", root / f"{fmt}-tiny{suffix}"
                assert whole.exists() == tiny.exists()
                if whole.exists():
                    data = tiny.read_bytes()
                    if suffix == ".consumer.json":  # the sidecar names its files
                        data = data.replace(f"{fmt}-tiny".encode(), f"{fmt}-whole".encode())
                    assert data == whole.read_bytes(), (fmt, suffix)
        ds.close()


def test_a_megatron_document_over_int32_tokens_is_refused_before_writing(tmp_path: Path) -> None:
    big = tmp_path / "src" / "a" / "big.bin"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(2**31)  # sparse: 2**31 content tokens + EOF with n_bytes=1
    ds = Consumer(str(tmp_path / "src"), n_bytes=1, metadata=None, seqlen=64, cache_dir=False)
    with pytest.raises(InputError, match=r"big.bin' has 2147483649 tokens; a megatron store holds at most 2147483647"):
        ds.pack(str(tmp_path / "out" / "s"))
    assert os.listdir(tmp_path / "out") == []


# ------------------------------------------------------------------------------------------ memory

_CHILD = textwrap.dedent("""
    import sys
    from consumer import Consumer, merge_packed
    src, out, fmt = sys.argv[1:4]
    ds = Consumer({"big": [src]}, n_bytes=1, metadata=None, seqlen=4096, cache_dir=False)
    ds.pack(out + "/packed", format=fmt)
    if fmt == "megatron":
        merge_packed([out + "/packed"], out + "/merged")
    # the child's own peak (KiB): ru_maxrss would carry the parent's peak over the exec of a vforked child
    with open("/proc/self/status") as f:
        print(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
""")


@pytest.mark.parametrize("fmt", ["megatron", "modalities"])
def test_packing_a_huge_document_keeps_memory_bounded(tmp_path: Path, fmt: str) -> None:
    """A 512 MiB sparse file is 2**29 tokens: 4 GiB as int64 (the old pack held all of it, 5 GiB peak).
    Packed (and for megatron merged) in a child process, the child's peak RSS stays under 512 MiB."""
    size = 512 << 20
    store = size * 2 + 64 * (1 << 10)  # uint16 tokens, plus index and table
    need = store * (2 if fmt == "megatron" else 1) + (256 << 20)
    free = shutil.disk_usage(tmp_path).free
    if free < need:
        pytest.skip(f"needs {need} bytes of free disk in {tmp_path} for the store, {free} free")
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        f.truncate(size)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(tmp_path), fmt], capture_output=True,
                          text=True, cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr
    peak = int(proc.stdout.split()[-1]) * 1024  # the child's own VmHWM, KiB
    assert peak < 512 << 20, f"peak RSS {peak >> 20} MiB while packing a document of {size * 8 >> 20} MiB of int64"
    _, packed, _ = open_packed(str(tmp_path / "packed"))
    assert packed.doc_len.tolist() == [size + 1] and packed.vocab.n_bytes == 1
    store = packed.source.tokens.tokens
    assert not store.read(0, 1 << 20).any() and int(store.read(store.size - 1, 1)[0]) == packed.vocab.eof
    if fmt == "megatron":
        assert (tmp_path / "merged.bin").stat().st_size == (tmp_path / "packed.bin").stat().st_size
        assert open_packed(str(tmp_path / "merged"))[1].doc_len.tolist() == packed.doc_len.tolist()
