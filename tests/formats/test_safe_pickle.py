"""The plain-data pickle interpreter's dispatch table: every opcode it knows is exercised (and loads as CPython
loads it, or is refused naming what it names), every other opcode is refused naming the opcode."""

from __future__ import annotations

import pickle
import pickletools
import struct

import pytest

from consumer.formats.safe_pickle import HANDLERS, IndexUnpickler, PickleRefused

NAME = {ord(op.code): op.name for op in pickletools.opcodes}

# opcode name -> a pickle that runs it
LOADS = {
    "BININT1": b"K\x05.", "BININT2": b"M\x01\x02.", "BININT": b"J\xff\xff\xff\xff.", "LONG1": b"\x8a\x02\x00\x01.",
    "TUPLE1": b"K\x01\x85.", "TUPLE2": b"K\x01K\x02\x86.", "TUPLE3": b"K\x01K\x02K\x03\x87.",
    "MEMOIZE": b"K\x01\x94h\x00\x86.", "MARK": b"](K\x01K\x02e.", "APPENDS": b"](K\x01K\x02e.",
    "APPEND": b"]K\x01a.", "EMPTY_LIST": b"].", "FRAME": b"\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00N.",
    "PROTO": b"\x80\x04N.", "STOP": b"N.", "BINPUT": b"K\x07q\x03h\x03\x86.",
    "LONG_BINPUT": b"K\x07r\x03\x00\x00\x00j\x03\x00\x00\x00\x86.", "BINGET": b"K\x07q\x03h\x03\x86.",
    "LONG_BINGET": b"K\x07r\x03\x00\x00\x00j\x03\x00\x00\x00\x86.", "PUT": b"K\x07p3\ng3\n\x86.",
    "GET": b"K\x07p3\ng3\n\x86.", "LONG4": b"\x8b\x02\x00\x00\x00\x00\x01.", "INT": b"(I42\nI01\nt.",
    "LONG": b"L42L\n.", "FLOAT": b"F1.5\n.", "BINFLOAT": b"G" + struct.pack(">d", 2.5) + b".", "NONE": b"N.",
    "NEWTRUE": b"\x88.", "NEWFALSE": b"\x89.", "UNICODE": b"Vab\n.", "SHORT_BINUNICODE": b"\x8c\x02ab.",
    "BINUNICODE": b"X\x02\x00\x00\x00ab.", "BINUNICODE8": b"\x8d" + struct.pack("<Q", 2) + b"ab.",
    "SHORT_BINBYTES": b"C\x02ab.", "BINBYTES": b"B\x02\x00\x00\x00ab.",
    "BINBYTES8": b"\x8e" + struct.pack("<Q", 2) + b"ab.", "SHORT_BINSTRING": b"U\x02ab.",
    "BINSTRING": b"T\x02\x00\x00\x00ab.", "EMPTY_TUPLE": b").", "TUPLE": b"(K\x01K\x02t.", "LIST": b"(K\x01l.",
    "POP": b"K\x01K\x020.", "POP_MARK": b"K\x01(K\x021.", "DUP": b"K\x012\x86.",
}
# opcode name -> (a pickle that runs it, the refusal it gets)
REFUSES = {
    "GLOBAL": (b"cos\nsystem\n.", "a reference to os.system"),
    "INST": (b"(ios\nsystem\n.", "a reference to os.system"),
    "STACK_GLOBAL": (b"\x8c\x02os\x8c\x06system\x93.", "a reference to os.system"),
}


def test_every_opcode_of_the_table_has_an_example() -> None:
    assert set(LOADS) | set(REFUSES) == {NAME[op] for op in HANDLERS}


@pytest.mark.parametrize("name", sorted(LOADS))
def test_each_opcode_of_the_table_loads_as_cpython_loads_it(name: str) -> None:
    data = LOADS[name]
    assert name in [op.name for op, _, _ in pickletools.genops(data)]  # the example runs the opcode
    assert IndexUnpickler(data, 1000, 8).load() == pickle.loads(data)


@pytest.mark.parametrize("name", sorted(REFUSES))
def test_an_opcode_naming_a_global_is_refused_naming_the_reference(name: str) -> None:
    data, message = REFUSES[name]
    assert name in [op.name for op, _, _ in pickletools.genops(data)]
    with pytest.raises(PickleRefused, match=f"{message} .*can execute code"):
        IndexUnpickler(data, 1000, 8).load()


@pytest.mark.parametrize("name", sorted(set(NAME.values()) - {NAME[op] for op in HANDLERS}))
def test_an_opcode_outside_the_table_is_refused_naming_the_opcode(name: str) -> None:
    code = next(op for op, n in NAME.items() if n == name)
    with pytest.raises(PickleRefused, match=rf"got .*opcode {name}\b.* \(at byte 2\)"):
        IndexUnpickler(b"\x80\x04" + bytes([code]) + b".", 1000, 8).load()


@pytest.mark.parametrize("code", sorted(set(range(256)) - set(NAME)))
def test_an_unknown_opcode_is_refused_naming_its_byte(code: int) -> None:
    with pytest.raises(PickleRefused) as info:
        IndexUnpickler(b"]" + bytes([code]) + b".", 1000, 8).load()
    assert str(info.value) == f"unknown opcode {bytes([code])!r} (at byte 1)"
