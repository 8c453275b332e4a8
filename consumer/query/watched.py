"""Running one DuckDB statement under a deadline and Ctrl-C.

The statement runs in a worker thread while the calling thread waits: past ``timeout`` seconds, or on Ctrl-C
(``KeyboardInterrupt`` in the caller), ``connection.interrupt()`` stops it. DuckDB looks at an interrupt between
two vectors of rows, so one function call over one vector is never cut short; the engine bounds what such a call
may build (:mod:`consumer.query.bounds`), which is what bounds the time past the deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import duckdb

from ..errors import QueryError, short_repr
from .rows import Params

__all__ = ["POLL_SECONDS", "run_watched"]

POLL_SECONDS = 0.05
"""Seconds between two looks at the deadline while a statement runs."""
_FETCH = 10_000


def _fetch(conn: duckdb.DuckDBPyConnection, statement: str, params: Params | None, max_rows: int | None,
           arrow: bool) -> tuple[Any, list[str]]:
    """The statement's result (rows, or a ``pyarrow.Table`` with ``arrow``) and its column names; at most
    ``max_rows + 1`` rows are fetched."""
    if arrow:
        table = conn.sql(statement, params=params).to_arrow_table()
        return table, list(table.column_names)
    cur = conn.execute(statement, params) if params is not None else conn.execute(statement)
    names = [d[0] for d in cur.description or []]
    if max_rows is None:
        return cur.fetchall(), names
    rows: list[tuple[Any, ...]] = []
    while True:
        chunk = cur.fetchmany(min(max_rows + 1 - len(rows), _FETCH) or 1)
        rows.extend(chunk)
        if len(rows) > max_rows or not chunk:
            break
    if chunk:
        conn.abort()  # the rest of the result is not wanted: the connection is free again
    return rows, names


def run_watched(conn: duckdb.DuckDBPyConnection, statement: str, params: Params | None, seconds: float | None,
                max_rows: int | None, on_error: Callable[[BaseException], BaseException], *,
                arrow: bool = False) -> tuple[Any, list[str]]:
    """Run ``statement`` (with ``params``: a sequence, a dict or None) in a worker thread, stopped after
    ``seconds`` (None: no limit; then :class:`QueryError` naming the statement and the timeout) or on Ctrl-C
    (``KeyboardInterrupt``). ``on_error`` turns any other error into the one to raise. Returns the result and
    its column names; more than ``max_rows`` rows is a QueryError."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["out"] = _fetch(conn, statement, params, max_rows, arrow)
        except BaseException as e:  # noqa: BLE001  (handed to the waiting thread)
            box["error"] = e
            try:
                conn.abort()  # whatever result was left half-read, the connection is free again
            except duckdb.Error:
                pass
        finally:
            done.set()

    worker = threading.Thread(target=work, name="consumer-sql", daemon=True)
    deadline = None if seconds is None else time.monotonic() + seconds
    timed_out = False
    worker.start()
    try:
        while not done.wait(POLL_SECONDS):
            if deadline is not None and time.monotonic() > deadline:
                timed_out = True
                conn.interrupt()
                done.wait()
    except KeyboardInterrupt:
        conn.interrupt()
        done.wait()
        raise KeyboardInterrupt(f"SQL statement interrupted: {short_repr(statement, 200)}") from None
    worker.join()
    if "error" in box:
        if timed_out:
            raise QueryError(f"statement stopped after the timeout of {seconds:g} s: "
                             f"{short_repr(statement, 200)}") from None
        raise on_error(box["error"]) from None
    rows, names = box["out"]
    if max_rows is not None and len(rows) > max_rows:
        raise QueryError(f"statement returned more than max_rows={max_rows} rows (add a LIMIT or raise "
                         f"max_rows): {short_repr(statement, 200)}")
    return rows, names
