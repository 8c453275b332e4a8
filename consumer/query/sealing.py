"""The seal of the DuckDB engine: the settings of every engine connection, and the checks a statement passes
before it runs (each refusal is a :class:`QueryError` naming the statement).

The connection is in-memory with ``enable_external_access=false`` (no file, URL, ``COPY``, ``ATTACH``,
``INSTALL``/``LOAD``), no Python replacement scans, no extension auto-install or auto-load, and then
``lock_configuration=true`` (no ``SET``). :func:`checked_statement` lets through exactly one statement of type
SELECT that reads only ``files`` and its own CTEs and calls only the table functions of
:data:`ALLOWED_TABLE_FUNCTIONS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import duckdb

from ..errors import QueryError, short_repr
from .duck_errors import refused
from .statement import JSON, StatementUse, analyse

__all__ = ["ALLOWED_TABLE_FUNCTIONS", "REGISTERED_TABLE", "SEALED_CONFIG", "checked_statement"]

ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
"""Table functions a statement may call in ``FROM`` (none of them reads anything outside the statement)."""

SEALED_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,     # no files, URLs, COPY, ATTACH, INSTALL, LOAD of external extensions
    "python_enable_replacements": False,  # FROM some_name never scans a Python variable of the caller
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
"""Connection settings of every engine connection (then ``lock_configuration=true``: no ``SET`` changes them)."""

REGISTERED_TABLE = "consumer_files"
"""The name of the registered Arrow table under the view ``files``; statements may not name it."""


def checked_statement(conn: duckdb.DuckDBPyConnection, statement: str,
                      on_error: Callable[[BaseException], BaseException]) -> tuple[JSON, StatementUse]:
    """The parse tree (DuckDB's ``json_serialize_sql``) and the use of ``statement``, once it passed the seal's
    checks; ``on_error`` turns a parser error into the error to raise."""
    try:
        statements = conn.extract_statements(statement)
    except duckdb.Error as e:
        raise on_error(e) from None
    if len(statements) != 1:
        raise refused("only one statement at a time", statement)
    if statements[0].type != duckdb.StatementType.SELECT:
        raise refused(f"only read-only SELECT statements are allowed, got {statements[0].type.name}",
                      statement)
    tree = json.loads(conn.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()[0][0])
    if tree.get("error") or len(tree.get("statements") or []) != 1:
        raise QueryError(f"SQL error in {short_repr(statement, 200)}: {tree.get('error_message', tree)}")
    node: JSON = tree["statements"][0]
    use = analyse(node)
    for table in use.tables:
        if table not in ("files", "documents") and table not in use.ctes:
            if "/" in table or "." in table or table == REGISTERED_TABLE or table.startswith("consumer_"):
                raise refused(f"table {table!r} is not allowed; statements read the view files", statement)
            raise QueryError(f"SQL error in {short_repr(statement, 200)}: no such table: {table}")
    bad = sorted(use.table_functions - ALLOWED_TABLE_FUNCTIONS)
    if bad:
        raise refused(f"table function {bad[0]}() is not allowed; allowed: "
                      f"{', '.join(sorted(ALLOWED_TABLE_FUNCTIONS))}", statement)
    return node, use
