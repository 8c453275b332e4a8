"""What the DuckDB engine raises for an error of DuckDB or of a UDF: the documented error, naming the statement.

A refusal of the seal is a :class:`QueryError` "statement refused (...)"; a syntax error names the position
(character offset, line and column) DuckDB's parser reports; a missing column, table or function is given
SQLite's words (``no such column: x``), then DuckDB's own message and its hint (``Candidate bindings: ...`` or
``Did you mean ...``), or, where DuckDB gives none, the closest known names (:mod:`difflib`). A byte predicate's
:class:`FileChangedError` comes back as it is, naming the statement.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence

import duckdb

from ..errors import FileChangedError, QueryError, short_repr
from .bytefuncs import ByteFunctions
from .functions import FunctionErrors

__all__ = ["engine_error", "refused", "syntax_position"]

_MISSING = ((re.compile(r'Referenced column "?([^"\s]+)"? not found'), "no such column"),
            (re.compile(r'does not have a column named "?([^"\s]+)"?'), "no such column"),
            (re.compile(r"Table with name \"?([^\"\s!]+)\"? does not exist"), "no such table"),
            (re.compile(r"Function with name \"?([^\"\s!]+)\"? does not exist"), "no such function"))
_HINTS = ("Candidate bindings:", "Did you mean")


def refused(reason: str, statement: str) -> QueryError:
    """The error of a statement the seal refuses."""
    return QueryError(f"statement refused ({reason}): {short_repr(statement, 200)}")


def _hint(message: str, name: str, known: Sequence[str]) -> str:
    """DuckDB's own hint line of ``message`` (candidate columns, "Did you mean"), else the names of ``known``
    closest to ``name``; "" when there is none."""
    for line in message.split("\n")[1:]:
        if line.strip().startswith(_HINTS):
            return f"; {line.strip()}"
    close = difflib.get_close_matches(name.lower(), list(known), n=3)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def engine_error(conn: duckdb.DuckDBPyConnection, statement: str, e: BaseException, *,
                 byte_functions: ByteFunctions | None, hist_errors: FunctionErrors,
                 columns: Sequence[str] = ()) -> BaseException:
    """The documented error for what DuckDB (or a UDF) raised while running ``statement``; ``columns``: the
    names a missing column is compared with when DuckDB suggests none."""
    if byte_functions is not None and byte_functions.error is not None:
        cause = byte_functions.error
        byte_functions.error = None
        if isinstance(cause, FileChangedError):
            return FileChangedError(f"{cause} (in {short_repr(statement, 200)})")
        return QueryError(f"SQL error in {short_repr(statement, 200)}: {cause}")
    if not isinstance(e, duckdb.Error):
        if isinstance(e, (QueryError, KeyboardInterrupt)):
            return e
        return QueryError(f"SQL error in {short_repr(statement, 200)}: {e}")
    if isinstance(e, duckdb.InterruptException):  # a Ctrl-C DuckDB saw itself (outside the worker's wait)
        return KeyboardInterrupt(f"SQL statement interrupted: {short_repr(statement, 200)}")
    message = str(e).strip()
    first = message.split("\n", 1)[0]
    if hist_errors.last and "UDF" in message:
        return QueryError(f"SQL error in {short_repr(statement, 200)}: {hist_errors.last}")
    if isinstance(e, duckdb.PermissionException):
        return refused(first, statement)
    if isinstance(e, duckdb.ParserException):
        where = syntax_position(conn, statement)
        return QueryError(f"SQL error in {short_repr(statement, 200)}: {first}{where}")
    for pattern, words in _MISSING:
        m = pattern.search(first)
        if m:
            hint = _hint(message, m.group(1), columns if words == "no such column" else ())
            return QueryError(f"SQL error in {short_repr(statement, 200)}: {words}: {m.group(1)} ({first}{hint})")
    return QueryError(f"SQL error in {short_repr(statement, 200)}: {first}")


def syntax_position(conn: duckdb.DuckDBPyConnection, statement: str) -> str:
    """`` at position P (line L, column C)`` of the syntax error DuckDB's parser reports ("" when unknown)."""
    try:
        info = json.loads(conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()[0][0])
        at = int(info["position"])
    except Exception:  # noqa: BLE001  (no position known: the message alone)
        return ""
    raw = statement.encode("utf-8")
    char = len(raw[:at].decode("utf-8", "ignore"))  # DuckDB counts bytes
    line = statement.count("\n", 0, char) + 1
    column = char - (statement.rfind("\n", 0, char) + 1) + 1
    return f" at position {char} (line {line}, column {column})"
