"""Which files a statement's filter can keep, before the lazy columns it needs are computed.

A partial lazy group (e.g. the content columns) is computed only for the files a statement can return:
:func:`candidates` runs the conjuncts of the statement's ``WHERE`` that use no column still to compute (a row
one of them rejects is rejected by the whole filter) as ``SELECT file_id FROM files WHERE ...``.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np

from ..util.sets import distinct
from .statement import JSON, analyse

__all__ = ["candidates"]


def _conjuncts(node: object) -> list[JSON]:
    """The AND-ed parts of a WHERE clause (the clause itself when it is not an AND)."""
    if not isinstance(node, dict):
        return []
    if node.get("class") == "CONJUNCTION" and node.get("type") == "CONJUNCTION_AND":
        return [part for child in node.get("children") or [] for part in _conjuncts(child)]
    return [node]


def _has_parameter(node: JSON) -> bool:
    stack: list[object] = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if x.get("class") == "PARAMETER":
                return True
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


def candidates(conn: duckdb.DuckDBPyConnection, tree: JSON, unknown: set[str]) -> np.ndarray | None:
    """The file ids a statement's filter can keep, judged from the conjuncts of its ``WHERE`` that use no
    column of ``unknown`` (those still to compute); None (every file) when that cannot be told: no such
    conjunct, a join, a CTE, set operations, parameters in them."""
    node = tree.get("node") or {}
    source = node.get("from_table") or {}
    if node.get("type") != "SELECT_NODE" or (node.get("cte_map") or {}).get("map") or \
            source.get("type") != "BASE_TABLE" or str(source.get("table_name", "")).lower() != "files":
        return None
    keep = [c for c in _conjuncts(node.get("where_clause"))
            if not (analyse(c).columns & unknown) and not _has_parameter(c)]
    if not keep:
        return None
    where = keep[0] if len(keep) == 1 else {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "",
                                             "children": keep}
    reduced = {"node": {"type": "SELECT_NODE", "modifiers": [], "cte_map": {"map": []},
                        "select_list": [{"class": "COLUMN_REF", "type": "COLUMN_REF", "alias": "",
                                         "column_names": ["file_id"]}],
                        "from_table": source, "where_clause": where, "group_expressions": [], "group_sets": [],
                        "aggregate_handling": "STANDARD_HANDLING", "having": None, "sample": None,
                        "qualify": None},
               "named_param_map": []}
    try:
        sql = conn.execute("SELECT json_deserialize_sql(?)",
                           [json.dumps({"error": False, "statements": [reduced]})]).fetchall()[0][0]
        found = conn.sql(sql).fetchnumpy()["file_id"]
    except Exception:  # noqa: BLE001  (a shape this reduction does not cover: compute every file)
        return None
    return distinct(np.asarray(found, dtype=np.int64))
