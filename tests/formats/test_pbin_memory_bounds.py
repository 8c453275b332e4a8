"""Bounded memory of the ``.pbin`` index unpickler (issue: a 10-byte pickle must not take gigabytes)."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.errors import FormatError
from consumer.formats.pbin import MAX_MEMO_INDEX, load_index_pickle, read_pbin
from consumer.formats.safe_pickle import IndexUnpickler

HOSTILE = {
    # LONG_BINPUT with the largest 4-byte key: CPython sizes its memo table by the key (32 GiB)
    "memo 2**31-1": b"\x80\x04K\x01r\xff\xff\xff\x7f.",
    # the same with 2**28 (a 4 GiB table)
    "memo 2**28": b"\x80\x04K\x01r\x00\x00\x00\x10.",
    # BINBYTES8 declaring 8 GiB: CPython allocates the bytes object before reading
    "bytes8 8 GiB": b"\x80\x04\x8e" + struct.pack("<Q", 2**33) + b".",
    # BYTEARRAY8 declaring 8 GiB (protocol 5), allocated the same way
    "bytearray8 8 GiB": b"\x80\x05\x96" + struct.pack("<Q", 2**33) + b".",
}

_PROBE = textwrap.dedent(
    """
    import pickle, resource, sys
    from consumer.errors import FormatError
    from consumer.formats.pbin import load_index_pickle

    def vm_size():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmSize")

    with open(sys.argv[1], "rb") as f:
        payload = f.read()
    loader = sys.argv[2]
    budget = vm_size() + 8 * 2**20  # everything so far plus 8 MiB of address space
    resource.setrlimit(resource.RLIMIT_AS, (budget, resource.RLIM_INFINITY))
    try:
        result = load_index_pickle(payload) if loader == "consumer" else pickle.loads(payload)
    except FormatError as e:
        print("FormatError:", e)
    except MemoryError:
        print("MemoryError")
    else:
        print("loaded", len(result))
    """
)


def _run_probe(payload: bytes, loader: str, tmp: Path) -> str:
    (tmp / "payload.pickle").write_bytes(payload)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(tmp / "payload.pickle"), loader], check=False,
                          capture_output=True, text=True, timeout=120, env=env, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_pickle_stays_within_8_mib(name: str, tmp_path: Path) -> None:
    """Under an address-space limit of 8 MiB above the interpreter, the hostile pickle is a FormatError,
    while CPython's own unpickler runs out of memory on the same bytes (so the limit really bites)."""
    payload = HOSTILE[name]
    assert len(payload) <= 20
    assert _run_probe(payload, "consumer", tmp_path).startswith("FormatError:")
    assert _run_probe(payload, "cpython", tmp_path) == "MemoryError"


def test_a_real_index_loads_under_the_same_limit(tmp_path: Path) -> None:
    index = [(i * 4, 4) for i in range(20_000)]
    assert _run_probe(pickle.dumps(index, protocol=4), "consumer", tmp_path) == "loaded 20000"
    assert _run_probe(pickle.dumps(index, protocol=2), "consumer", tmp_path) == "loaded 20000"  # the interpreter path


def test_hostile_pbin_file_is_a_format_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "evil.pbin"
    path.write_bytes(struct.pack("<QI", 0, 2) + HOSTILE["memo 2**31-1"])
    with pytest.raises(FormatError, match="evil.pbin: index"):
        read_pbin(path)


def test_nesting_depth_is_capped() -> None:
    deep = b"\x80\x04" + b"]" * 100_000 + b"a" * 99_999 + b"."
    with pytest.raises(FormatError, match="nested 65 deep, more than the cap of 64"):
        load_index_pickle(deep)
    with pytest.raises(FormatError, match="nested 4 deep, more than the cap of 3"):
        load_index_pickle(pickle.dumps([[[[1]]]], protocol=2), max_depth=3)


def test_deep_tuples_on_the_fast_path_give_a_short_message() -> None:
    """TUPLE2 chains are canonical tokens: C loads them, the entry check reports without deep repr."""
    deep = b"\x80\x04]\x94K\x00" + b"K\x00\x86" * 50_000 + b"K\x00\x86a."
    with pytest.raises(FormatError, match=r"index\[0\]: expected a tuple of 2 ints") as info:
        load_index_pickle(deep)
    assert len(str(info.value)) < 300


def test_units_cap() -> None:
    data = pickle.dumps([(i, 1) for i in range(100)], protocol=2)
    assert load_index_pickle(data, max_units=1000).shape == (100, 2)
    with pytest.raises(FormatError, match="more than 500 objects and container slots"):
        load_index_pickle(data, max_units=500)
    canonical = pickle.dumps([(i, 1) for i in range(100)], protocol=4)  # too long for the fast path: same cap
    with pytest.raises(FormatError, match="more than 500 objects"):
        load_index_pickle(canonical, max_units=500)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"\x80\x04]\x94h\x00a.", "contains itself"),
        (b"\x80\x02]q\x00]q\x01h\x00a0K\x01a.", "changed after it was put inside"),
        (b"\x80\x02K\x01p4294967296\n.", f"outside [0, {MAX_MEMO_INDEX}]"),
        (b"\x80\x02h\x07.", "memo key 7 was never stored"),
        (b"\x80\x02\x8b\x00\x00\x01\x00.", "LONG4 of 65536 bytes"),
        (b"\x80\x02I" + b"1" * 300 + b"\n.", "newline within 256 bytes"),
        (b"\x80\x02}.", "got a dict (opcode EMPTY_DICT)"),
        (b"\x80\x02\x8f.", "got a set (opcode EMPTY_SET)"),
        (b"\x80\x02\xff.", "unknown opcode"),
        (b"\x80\x02K", "truncated"),
        (b"\x80\x02K\x01", "no STOP"),
        (b"\x80\x02e.", "no MARK"),
    ],
)
def test_interpreter_refusals(payload: bytes, needle: str) -> None:
    with pytest.raises(FormatError, match="not a valid pickle") as info:
        load_index_pickle(payload)
    assert needle in str(info.value)


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.tuples(children) | st.tuples(children, children)
    | st.tuples(children, children, children) | st.lists(children, max_size=3).map(tuple),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(obj=plain, protocol=st.integers(1, 5))
def test_interpreter_matches_pickle_on_plain_data(obj: object, protocol: int) -> None:
    """Whatever pickle.dumps writes for plain data, the interpreter rebuilds exactly (floats, str included)."""
    data = pickle.dumps(obj, protocol=protocol)
    assert IndexUnpickler(data, 10**6, 64).load() == pickle.loads(data)


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(0, 2**40), max_size=2500), protocol=st.integers(0, 5))
def test_canonical_and_interpreted_paths_agree(lengths: list[int], protocol: int) -> None:
    offsets = [sum(lengths[:i]) for i in range(len(lengths))]
    index = list(zip(offsets, lengths))
    data = pickle.dumps(index, protocol=protocol)
    got = load_index_pickle(data)
    assert got.tolist() == [list(e) for e in index]
    assert IndexUnpickler(data, 10**7, 64).load() == index
