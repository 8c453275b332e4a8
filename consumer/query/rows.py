"""What both SQL engines share: the result type :class:`Rows` and the checks of a statement's arguments
(:func:`check_timeout`, :func:`plain_params`). The DuckDB engine (:mod:`consumer.query.duck`) and the SQLite
dialect (:mod:`consumer.query.sqlite`) import them from here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import QueryError, short_repr

if TYPE_CHECKING:
    import pandas
    import polars
    import pyarrow

__all__ = ["Params", "Row", "Rows", "check_timeout", "plain_params"]

Row = tuple[Any, ...]
"""One result row: SQL values (int, float, str, bytes, None, ...), typed by the statement, not here."""

Params = Sequence[object] | Mapping[str, object]
"""A statement's parameters: ``?`` ones (a sequence) or ``$name`` ones (a dict)."""


class Rows(list[Row]):
    """Result rows (tuples) with the column names in ``columns``."""

    def __init__(self, rows: Iterable[Row], columns: list[str]):
        super().__init__(rows)
        self.columns = columns

    def as_dicts(self) -> list[dict[str, Any]]:
        """The rows as ``{column: value}`` dicts."""
        return [dict(zip(self.columns, r)) for r in self]

    def to_pandas(self) -> pandas.DataFrame:
        """The rows as a ``pandas.DataFrame`` (needs pandas: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_pandas  # noqa: PLC0415  (optional libraries load only when asked)

        return rows_to_pandas(self, self.columns)

    def to_arrow(self) -> pyarrow.Table:
        """The rows as a ``pyarrow.Table`` (needs pyarrow: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_arrow  # noqa: PLC0415

        return rows_to_arrow(self, self.columns)

    def to_polars(self) -> polars.DataFrame:
        """The rows as a ``polars.DataFrame`` (needs polars: ``pip install "consumer[dataframes]"``)."""
        from .frames import rows_to_polars  # noqa: PLC0415

        return rows_to_polars(self, self.columns)


def check_timeout(timeout: object) -> float | None:
    """``timeout`` (seconds) as a float, or None for no limit; QueryError unless a finite number > 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise QueryError(f"timeout must be a number of seconds > 0 or None, got {short_repr(timeout)}")
    return float(timeout)


def plain_params(params: object) -> list[object] | dict[str, object]:
    """A statement's parameters with numpy scalars as Python values (sqlite3 would bind ``numpy.int64(3)`` as an
    8-byte blob, not as 3); QueryError unless they are a sequence (list, tuple) or a dict."""
    if isinstance(params, dict):
        return {k: v.item() if isinstance(v, np.generic) else v for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [v.item() if isinstance(v, np.generic) else v for v in params]
    raise QueryError(f"params must be a sequence or a dict, got {short_repr(params)}")
