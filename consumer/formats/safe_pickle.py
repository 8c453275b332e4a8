"""A pickle interpreter for plain data only, as a table of opcode handlers (used for ``.pbin`` indexes).

:class:`IndexUnpickler` reads lists, tuples and ints (plus None, bools, floats, short str/bytes, so a wrong index
gets a precise message). It never looks anything up or calls anything, and it bounds what it allocates: the memo
is a dict (no table sized by a memo key), objects plus container slots are capped (:data:`MAX_PICKLE_UNITS`), so
is nesting depth (:data:`MAX_PICKLE_DEPTH`); a list may not be changed after it was put inside another container
(``pickle.dumps`` never does that), which rules out cycles and keeps the depth bookkeeping exact. Iterative: no
recursion.

:data:`HANDLERS` maps each opcode it runs to its handler and to whether the opcode makes one new object (counted
against the cap); an opcode pickle knows but the table lacks (dicts, sets, calls, objects, persistent ids, ...)
is refused naming what it would build, an opcode pickle does not know is refused naming its byte, and the three
opcodes that name a global (``GLOBAL``, ``INST``, ``STACK_GLOBAL``) are refused naming the reference.
"""

from __future__ import annotations

import pickle
import pickletools
import struct
from collections.abc import Callable, Iterable
from typing import NamedTuple

__all__ = ["HANDLERS", "MAX_MEMO_INDEX", "MAX_PICKLE_DEPTH", "MAX_PICKLE_UNITS", "IndexUnpickler", "PickleRefused"]

# Caps of the index unpickler (see ``docs/reliability.md``). A Modalities index holds one tuple of two ints per
# document, so a real index needs 6 units per document (2 ints, 1 tuple, 2 tuple slots, 1 list slot) and a
# nesting depth of 2.
MAX_PICKLE_UNITS = 2**28
"""Objects created plus container slots filled, at most (about 44 million index entries)."""
MAX_PICKLE_DEPTH = 64
"""Nesting depth of containers, at most."""
MAX_MEMO_INDEX = 2**31 - 1
"""Largest memo key accepted (the memo is a dict: a huge key costs nothing, but is never produced by pickle)."""
_MAX_LONG_BYTES = 64  # LONG4 / LONG1 payload; an index int needs at most 9
_MAX_TEXT_LINE = 256  # protocol-0 text arguments (INT, LONG, FLOAT, PUT, GET)

_OPNAME = {ord(op.code): op.name for op in pickletools.opcodes}
_REFUSED_KIND = {
    "EMPTY_DICT": "a dict", "DICT": "a dict", "SETITEM": "a dict", "SETITEMS": "a dict",
    "EMPTY_SET": "a set", "ADDITEMS": "a set", "FROZENSET": "a frozenset",
    "BYTEARRAY8": "a bytearray", "NEXT_BUFFER": "an out-of-band buffer", "READONLY_BUFFER": "an out-of-band buffer",
    "PERSID": "a persistent id", "BINPERSID": "a persistent id",
    "EXT1": "an extension-registry reference", "EXT2": "an extension-registry reference",
    "EXT4": "an extension-registry reference",
    "REDUCE": "a call", "BUILD": "an object state", "OBJ": "an object", "NEWOBJ": "an object",
    "NEWOBJ_EX": "an object",
}


class PickleRefused(Exception):
    """The pickle breaks a rule (the message says which); the caller turns it into its own error."""


class _Stop(Exception):  # noqa: N818  (control flow, not an error: STOP hands the result to the loop)
    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value


class _Machine:
    """The interpreter's state while it runs one pickle, and the checks its handlers share."""

    __slots__ = ("data", "end", "pos", "stack", "marks", "memo", "depth", "nested", "keep", "units", "max_units",
                 "max_depth")

    def __init__(self, data: bytes, max_units: int, max_depth: int) -> None:
        self.data = data
        self.end = len(data)
        self.pos = 0
        self.stack: list[object] = []
        self.marks: list[int] = []
        self.memo: dict[int, object] = {}
        self.depth: dict[int, int] = {}  # id -> depth of containers deeper than 1 (others: 1; scalars 0)
        self.nested: set[int] = set()  # ids of lists placed inside another container: frozen from then on
        self.keep: list[object] = []  # keeps every container in depth/nested alive, so ids are never reused
        self.units = 0
        self.max_units = max_units
        self.max_depth = max_depth

    def fail(self, pos: int, what: str) -> PickleRefused:
        return PickleRefused(f"{what} (at byte {pos})")

    def need(self, n: int, at: int) -> None:
        if at + n > self.end:
            raise self.fail(at, f"truncated: expected {n} more byte(s), got {self.end - at}")

    def count(self, n: int, at: int) -> None:
        self.units += n
        if self.units > self.max_units:
            raise self.fail(at, f"more than {self.max_units} objects and container slots")

    def child_depth(self, x: object) -> int:
        if type(x) is list or type(x) is tuple:
            return self.depth.get(id(x), 1)
        return 0

    def nest(self, parent_depth: int, items: Iterable[object]) -> int:
        d = parent_depth
        for x in items:
            if type(x) is list or type(x) is tuple:
                d = max(d, self.depth.get(id(x), 1) + 1)
                if type(x) is list and id(x) not in self.nested:
                    self.nested.add(id(x))
                    self.keep.append(x)
        if d > self.max_depth:
            raise self.fail(self.pos, f"containers nested {d} deep, more than the cap of {self.max_depth}")
        return d

    def set_depth(self, obj: object, d: int) -> None:
        if d > 1:
            if id(obj) not in self.depth:
                self.keep.append(obj)
            self.depth[id(obj)] = d

    def pop_mark(self, at: int) -> list[object]:
        if not self.marks:
            raise self.fail(at, "no MARK on the stack")
        k = self.marks.pop()
        items = self.stack[k:]
        del self.stack[k:]
        return items

    def text_line(self, at: int) -> bytes:
        nl = self.data.find(b"\n", at, min(self.end, at + _MAX_TEXT_LINE + 1))
        if nl < 0:
            raise self.fail(at, f"text argument not ended by a newline within {_MAX_TEXT_LINE} bytes")
        return bytes(self.data[at:nl])

    def memo_key(self, key: int, at: int) -> int:
        if key < 0 or key > MAX_MEMO_INDEX:
            raise self.fail(at, f"memo key {key} outside [0, {MAX_MEMO_INDEX}]")
        return key

    def memo_room(self, at: int) -> None:
        if len(self.memo) >= self.max_units:
            raise self.fail(at, f"more than {self.max_units} memo entries")

    def append_to(self, lst: object, items: list[object], at: int) -> None:
        if type(lst) is not list:
            raise self.fail(at, f"APPEND(S) to a {type(lst).__name__}, expected a list")
        if id(lst) in self.nested:
            raise self.fail(at, "a list is changed after it was put inside another container")
        for x in items:
            if x is lst:
                raise self.fail(at, "a list contains itself")
        self.count(len(items), at)
        d = self.nest(self.child_depth(lst), items)
        lst.extend(items)
        self.set_depth(lst, d)


# ------------------------------------------------------------------------------------ the handlers
# Each takes the machine, the opcode and the opcode's position (``m.pos`` is already past the opcode byte) and
# moves ``m.pos`` past its arguments.

def _binint1(m: _Machine, op: int, at: int) -> None:
    m.stack.append(m.data[m.pos])
    m.pos += 1


def _binint2(m: _Machine, op: int, at: int) -> None:
    m.stack.append(m.data[m.pos] | (m.data[m.pos + 1] << 8))
    m.pos += 2


def _binint(m: _Machine, op: int, at: int) -> None:
    m.stack.append(struct.unpack_from("<i", m.data, m.pos)[0])
    m.pos += 4


def _long1(m: _Machine, op: int, at: int) -> None:
    m.need(1, m.pos)
    n = m.data[m.pos]
    m.need(n, m.pos + 1)
    m.stack.append(int.from_bytes(m.data[m.pos + 1 : m.pos + 1 + n], "little", signed=True))
    m.pos += 1 + n


def _long4(m: _Machine, op: int, at: int) -> None:
    m.need(4, m.pos)
    n = struct.unpack_from("<i", m.data, m.pos)[0]
    if not 0 <= n <= _MAX_LONG_BYTES:
        raise m.fail(at, f"LONG4 of {n} bytes (an index int needs at most 9, cap {_MAX_LONG_BYTES})")
    m.need(n, m.pos + 4)
    m.stack.append(int.from_bytes(m.data[m.pos + 4 : m.pos + 4 + n], "little", signed=True))
    m.pos += 4 + n


def _tuple_n(m: _Machine, op: int, at: int) -> None:  # TUPLE1, TUPLE2, TUPLE3
    n = op - 0x84
    stack = m.stack
    if len(stack) - (m.marks[-1] if m.marks else 0) < n:
        raise m.fail(at, f"{_OPNAME[op]} needs {n} item(s) above the last MARK")
    m.units += n
    t: tuple[object, ...]
    if n == 2:
        b = stack.pop()
        a = stack.pop()
        t = (a, b)
        if type(a) is not int or type(b) is not int:
            m.set_depth(t, m.nest(1, t))
    else:
        t = tuple(stack[-n:])
        del stack[-n:]
        m.set_depth(t, m.nest(1, t))
    stack.append(t)


def _memoize(m: _Machine, op: int, at: int) -> None:
    if not m.stack:
        raise m.fail(at, "MEMOIZE with an empty stack")
    m.memo_room(at)
    m.memo[len(m.memo)] = m.stack[-1]


def _mark(m: _Machine, op: int, at: int) -> None:
    m.marks.append(len(m.stack))


def _appends(m: _Machine, op: int, at: int) -> None:
    items = m.pop_mark(at)
    if not m.stack:
        raise m.fail(at, "APPENDS with no list below the MARK")
    m.append_to(m.stack[-1], items, at)


def _append(m: _Machine, op: int, at: int) -> None:
    if len(m.stack) - (m.marks[-1] if m.marks else 0) < 2:
        raise m.fail(at, "APPEND needs a list and an item")
    item = m.stack.pop()
    m.append_to(m.stack[-1], [item], at)


def _empty_list(m: _Machine, op: int, at: int) -> None:
    m.stack.append([])


def _frame(m: _Machine, op: int, at: int) -> None:
    m.need(8, m.pos)
    m.pos += 8


def _proto(m: _Machine, op: int, at: int) -> None:
    m.need(1, m.pos)
    if m.data[m.pos] > pickle.HIGHEST_PROTOCOL:
        raise m.fail(at, f"unsupported pickle protocol {m.data[m.pos]}")
    m.pos += 1


def _stop(m: _Machine, op: int, at: int) -> None:
    if not m.stack:
        raise m.fail(at, "STOP with an empty stack")
    raise _Stop(m.stack[-1])


def _binput(m: _Machine, op: int, at: int) -> None:  # BINPUT, LONG_BINPUT
    n = 1 if op == 0x71 else 4
    m.need(n, m.pos)
    key = m.data[m.pos] if n == 1 else struct.unpack_from("<I", m.data, m.pos)[0]
    m.pos += n
    if not m.stack:
        raise m.fail(at, f"{_OPNAME[op]} with an empty stack")
    m.memo_room(at)
    m.memo[m.memo_key(key, at)] = m.stack[-1]


def _binget(m: _Machine, op: int, at: int) -> None:  # BINGET, LONG_BINGET
    n = 1 if op == 0x68 else 4
    m.need(n, m.pos)
    key = m.data[m.pos] if n == 1 else struct.unpack_from("<I", m.data, m.pos)[0]
    m.pos += n
    if key not in m.memo:
        raise m.fail(at, f"memo key {key} was never stored")
    m.stack.append(m.memo[key])


def _put_get(m: _Machine, op: int, at: int) -> None:  # PUT, GET (text)
    line = m.text_line(m.pos)
    m.pos += len(line) + 1
    if not line.isdigit():
        raise m.fail(at, f"memo key {line!r} is not a number")
    key = m.memo_key(int(line), at)
    if op == 0x70:
        if not m.stack:
            raise m.fail(at, "PUT with an empty stack")
        m.memo[key] = m.stack[-1]
    elif key not in m.memo:
        raise m.fail(at, f"memo key {key} was never stored")
    else:
        m.stack.append(m.memo[key])


def _int_text(m: _Machine, op: int, at: int) -> None:  # INT, LONG (text)
    line = m.text_line(m.pos)
    m.pos += len(line) + 1
    text = line[:-1] if op == 0x4C and line.endswith(b"L") else line
    if op == 0x49 and line in (b"00", b"01"):
        m.stack.append(line == b"01")
        return
    try:
        m.stack.append(int(text))
    except ValueError:
        raise m.fail(at, f"{_OPNAME[op]} argument {line!r} is not an integer") from None


def _float_text(m: _Machine, op: int, at: int) -> None:
    line = m.text_line(m.pos)
    m.pos += len(line) + 1
    try:
        m.stack.append(float(line))
    except ValueError:
        raise m.fail(at, f"FLOAT argument {line!r} is not a number") from None


def _binfloat(m: _Machine, op: int, at: int) -> None:
    m.need(8, m.pos)
    m.stack.append(struct.unpack_from(">d", m.data, m.pos)[0])
    m.pos += 8


def _none(m: _Machine, op: int, at: int) -> None:
    m.stack.append(None)


def _bool(m: _Machine, op: int, at: int) -> None:  # NEWTRUE, NEWFALSE
    m.stack.append(op == 0x88)


def _unicode_text(m: _Machine, op: int, at: int) -> None:
    line = m.text_line(m.pos)
    m.pos += len(line) + 1
    m.stack.append(line.decode("raw-unicode-escape", "replace"))


_COUNTED_WIDTH = {0x8C: 1, 0x58: 4, 0x8D: 8, 0x43: 1, 0x42: 4, 0x8E: 8, 0x55: 1, 0x54: 4}


def _counted(m: _Machine, op: int, at: int) -> None:  # str / bytes with a counted length
    width = _COUNTED_WIDTH[op]
    m.need(width, m.pos)
    n = int.from_bytes(m.data[m.pos : m.pos + width], "little")
    m.need(n, m.pos + width)
    raw = bytes(m.data[m.pos + width : m.pos + width + n])
    m.pos += width + n
    if op in (0x55, 0x54):  # protocol-1 SHORT_BINSTRING / BINSTRING: Python 2 str
        m.stack.append(raw.decode("latin-1"))
    elif op in (0x8C, 0x58, 0x8D):
        try:
            m.stack.append(raw.decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            raise m.fail(at, f"{_OPNAME[op]} is not valid UTF-8") from None
    else:
        m.stack.append(raw)


def _empty_tuple(m: _Machine, op: int, at: int) -> None:
    m.stack.append(())


def _tuple_or_list(m: _Machine, op: int, at: int) -> None:  # TUPLE, LIST
    items = m.pop_mark(at)
    m.count(len(items), at)
    d = m.nest(1, items)
    obj = tuple(items) if op == 0x74 else items
    m.set_depth(obj, d)
    m.stack.append(obj)


def _pop(m: _Machine, op: int, at: int) -> None:
    if not m.stack:
        raise m.fail(at, "POP with an empty stack")
    if m.marks and m.marks[-1] == len(m.stack):
        m.marks.pop()
    else:
        m.stack.pop()


def _pop_mark(m: _Machine, op: int, at: int) -> None:
    m.pop_mark(at)


def _dup(m: _Machine, op: int, at: int) -> None:
    if not m.stack:
        raise m.fail(at, "DUP with an empty stack")
    m.stack.append(m.stack[-1])


def _refused_reference(ref: str, at: int) -> PickleRefused:
    return PickleRefused(f"expected a pickle of only lists, tuples and ints, got a reference to {ref} (at byte {at}); "
                         "refusing to load it (a pickle that names a callable can execute code)")


def _global_text(m: _Machine, op: int, at: int) -> None:  # GLOBAL, INST: module and name as text lines
    module = m.text_line(m.pos)
    name = m.text_line(m.pos + len(module) + 1)
    raise _refused_reference(f"{module.decode('latin-1')}.{name.decode('latin-1')}", at)


def _stack_global(m: _Machine, op: int, at: int) -> None:
    raise _refused_reference(".".join(str(x) for x in m.stack[-2:]), at)


def _refuse(m: _Machine, op: int, at: int) -> None:
    """Every opcode the table lacks: named by what it would build, or by its byte when pickle does not know it."""
    opname = _OPNAME.get(op)
    if opname is None:
        raise m.fail(at, f"unknown opcode {bytes([op])!r}")
    kind = f"{_REFUSED_KIND[opname]} (opcode {opname})" if opname in _REFUSED_KIND else f"opcode {opname}"
    raise m.fail(at, f"expected a list of (offset, length) tuples, got {kind}")


Handler = Callable[[_Machine, int, int], None]


class Opcode(NamedTuple):
    """One entry of :data:`HANDLERS`: the handler and whether the opcode makes one new object (one unit)."""

    run: Handler
    new_object: bool


def _table(entries: dict[str, tuple[Handler, bool]]) -> dict[int, Opcode]:
    codes = {op.name: ord(op.code) for op in pickletools.opcodes}
    return {codes[name]: Opcode(run, new) for names, (run, new) in entries.items() for name in names.split()}


HANDLERS: dict[int, Opcode] = _table({
    "BININT1": (_binint1, True), "BININT2": (_binint2, True), "BININT": (_binint, True), "LONG1": (_long1, True),
    "TUPLE1 TUPLE2 TUPLE3": (_tuple_n, True), "MEMOIZE": (_memoize, False), "MARK": (_mark, False),
    "APPENDS": (_appends, False), "APPEND": (_append, False), "EMPTY_LIST": (_empty_list, True),
    "FRAME": (_frame, False), "PROTO": (_proto, False), "STOP": (_stop, False),
    "BINPUT LONG_BINPUT": (_binput, False), "BINGET LONG_BINGET": (_binget, False), "PUT GET": (_put_get, False),
    "LONG4": (_long4, True), "INT LONG": (_int_text, True), "FLOAT": (_float_text, True),
    "BINFLOAT": (_binfloat, True), "NONE": (_none, True), "NEWTRUE NEWFALSE": (_bool, True),
    "UNICODE": (_unicode_text, True),
    "SHORT_BINUNICODE BINUNICODE BINUNICODE8 SHORT_BINBYTES BINBYTES BINBYTES8 SHORT_BINSTRING BINSTRING":
        (_counted, True),
    "EMPTY_TUPLE": (_empty_tuple, True), "TUPLE LIST": (_tuple_or_list, True), "POP": (_pop, False),
    "POP_MARK": (_pop_mark, False), "DUP": (_dup, True), "GLOBAL INST": (_global_text, False),
    "STACK_GLOBAL": (_stack_global, False),
})
"""Opcode byte -> :class:`Opcode`, for every opcode the interpreter runs (or refuses by name, for the globals)."""
_REFUSE = Opcode(_refuse, False)


class IndexUnpickler:
    """The interpreter (see the module docstring): ``IndexUnpickler(data, max_units, max_depth).load()``."""

    def __init__(self, data: bytes, max_units: int, max_depth: int) -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.max_units = max_units
        self.max_depth = max_depth

    def load(self) -> object:
        """The unpickled object; :class:`PickleRefused` for anything outside the rules of the module docstring."""
        m = _Machine(self.data, self.max_units, self.max_depth)
        handlers, refuse, data, end = HANDLERS, _REFUSE, m.data, m.end
        try:
            while m.pos < end:
                at = m.pos
                op = data[at]
                m.pos = at + 1
                run, new_object = handlers.get(op, refuse)
                run(m, op, at)
                if new_object:
                    m.units += 1
                    if m.units > m.max_units:
                        raise m.fail(at, f"more than {m.max_units} objects and container slots")
        except _Stop as stop:
            return stop.value
        except (IndexError, struct.error):  # a hot-path opcode read past the end (or below the stack)
            raise PickleRefused(f"truncated or malformed: an opcode reads past the end of the {len(self.data)} "
                                "bytes or below the bottom of the stack") from None
        raise PickleRefused(f"truncated: no STOP opcode in {end} bytes")
