"""What a SQL statement uses, read from its parse tree (DuckDB's ``json_serialize_sql``), not from its text.

:func:`analyse` walks the parse tree of one SELECT statement (the JSON DuckDB's own parser gives; this module
needs no database) and returns a :class:`StatementUse`: the columns it names (``COLUMN_REF`` nodes, the last
part of ``f.mime`` and ``"mime"`` alike), whether it expands a ``*`` / ``COLUMNS(...)`` anywhere, the tables,
table functions and functions it calls, and the CTE names it defines. Comments, string literals and aliases
never count as a column, and a ``*`` inside a subquery counts like one at the top.

The engine (:mod:`consumer.query.duck`) uses it for three things: which lazy columns to compute before the
statement runs (:meth:`StatementUse.needs`), which tables and table functions to refuse, and the names of
the result's columns (:func:`output_names`: an expression without ``AS`` is named by its own text, as
SQLite does, e.g. ``count(*)`` rather than DuckDB's ``count_star()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JSON", "StatementUse", "analyse", "output_names"]

_NO_LOCATION = 2**64 - 1  # DuckDB's "no location" marker


@dataclass
class StatementUse:
    """Everything :func:`analyse` found in one statement (names lower-case)."""

    columns: set[str] = field(default_factory=set)
    star: bool = False
    tables: list[str] = field(default_factory=list)        # BASE_TABLE references, qualified as written
    table_functions: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    ctes: set[str] = field(default_factory=set)

    def needs(self, lazy: frozenset[str] | set[str], *, star_includes: bool) -> bool:
        """Whether the statement uses one of the ``lazy`` columns: names one, or (``star_includes``) expands
        a ``*``, which shows them."""
        return bool(self.columns & set(lazy)) or (star_includes and self.star)


JSON = dict[str, Any]
"""A node of DuckDB's parse tree (``json_serialize_sql``): JSON, so its values are of any JSON type."""


def _nodes(tree: object) -> Iterator[JSON]:
    """Every dict of the parse tree, depth first."""
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


_TABLE_REFS = ("BASE_TABLE", "SUBQUERY", "JOIN", "TABLE_FUNCTION", "PIVOT")


def _table_ref(node: JSON, kind: object, use: StatementUse, relations: set[str]) -> None:
    """What a ``FROM`` item adds: its names (a column named like one is the whole row), the columns of
    ``USING``, and a ``*`` for what uses every column without naming it (``NATURAL`` and ``POSITIONAL`` joins,
    ``PIVOT``'s implicit grouping, columns renamed by position as in ``files AS f(a, b)``)."""
    relations.add(str(node.get("alias") or "").lower())
    if kind == "BASE_TABLE":
        path = (node.get("qualified_name") or {}).get("path") or [node.get("table_name", "")]
        use.tables.append(".".join(str(p) for p in path).lower())
        relations.add(str(node.get("table_name", "")).lower())
    elif kind == "TABLE_FUNCTION":
        fn = node.get("function") or {}
        use.table_functions.add(str(fn.get("function_name", "")).lower())
    use.columns.update(str(c).lower() for c in node.get("using_columns") or [])
    if node.get("column_name_alias") or kind == "PIVOT" or node.get("ref_type") in ("NATURAL", "POSITIONAL"):
        use.star = True


def analyse(tree: JSON) -> StatementUse:
    """The :class:`StatementUse` of one statement's parse tree (``json_serialize_sql(...)["statements"][0]``).

    Besides ``*`` and ``COLUMNS(...)``, a reference to a whole row (``SELECT f FROM files f``) and the ``FROM``
    items that use every column without naming it (see :func:`_table_ref`) count as a ``*``: the engine then
    computes every lazy column such a statement could show."""
    use = StatementUse()
    single: set[str] = set()  # one-part column references: a table's name or alias is its whole row
    relations: set[str] = set()
    for node in _nodes(tree):
        cls, kind = node.get("class"), node.get("type")
        if cls == "COLUMN_REF":
            names = node.get("column_names") or []
            if names:
                use.columns.add(str(names[-1]).lower())
            if len(names) == 1:
                single.add(str(names[0]).lower())
        elif cls == "STAR":
            use.star = True
        elif cls == "FUNCTION":
            use.functions.add(str(node.get("function_name", "")).lower())
        if kind in _TABLE_REFS and cls is None:
            _table_ref(node, kind, use, relations)
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            use.ctes.update(str(e.get("key", "")).lower() for e in cte_map.get("map") or [])
    use.functions -= use.table_functions  # a table function's FUNCTION node is its call, not a scalar one
    if single & ((relations | use.ctes) - {""}):
        use.star = True
    return use


def _first_select(node: JSON | None) -> JSON | None:
    while node and node.get("type") == "SET_OPERATION_NODE":  # a set operation is named by its first part
        children = node.get("children") or [node.get("left")]
        node = children[0] if children else None
    return node if node and node.get("type") == "SELECT_NODE" else None


def output_names(tree: JSON, statement: str, names: list[str]) -> list[str]:
    """The result's column names: DuckDB's ``names``, except that an expression written without ``AS`` at the
    top level is named by its text in ``statement`` (``count(*)``, ``sum(size)``), as SQLite names it. Kept as
    DuckDB names them whenever the select list does not map one to one (``*``) or a position is unknown."""
    select = _first_select(tree.get("node") or {})
    items = (select or {}).get("select_list") or []
    if len(items) != len(names) or any(i.get("class") == "STAR" for i in items):
        return names
    out = list(names)
    raw = statement.encode("utf-8", "surrogatepass")
    for k, item in enumerate(items):
        at, length = item.get("query_location", _NO_LOCATION), item.get("query_location_length", 0)
        if item.get("alias") or item.get("class") in ("COLUMN_REF", "CONSTANT") or not length or at == _NO_LOCATION:
            continue
        text = raw[at:at + length].decode("utf-8", "replace")  # DuckDB's positions count bytes
        if text and "\n" not in text:
            out[k] = text
    return out
