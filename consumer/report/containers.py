"""The per-container panel of a records dataset (documents inside files: ``documents="jsonl"``, ``"lines"``, ...).

``files`` has one row per container and ``documents`` one per document (``consumer/query/documents.py``); the panel
joins them on ``file_id`` and shows aggregates only: a summary, a log-scale histogram of documents per container and
the containers holding the most documents. Like every panel, each number is the answer of the statement beside it.
"""

from __future__ import annotations

import numpy as np

from .page import Panel
from .panels import Context, _charts, _table
from .svg import PALETTE, hbars, histogram

__all__ = ["containers", "container_statements"]

_TOP_CONTAINERS = 10  # containers listed (the most documents first)

_PER_CONTAINER = ("WITH c AS (SELECT f.file_id, f.path, f.size AS container_bytes, count(d.doc_id) AS documents, "
                  "coalesce(sum(d.size), 0) AS bytes, coalesce(sum(d.tokens), 0) AS tokens, "
                  "count(DISTINCT d.class) AS classes FROM files AS f LEFT JOIN documents AS d "
                  "ON d.file_id = f.file_id GROUP BY f.file_id, f.path, f.size) ")


def container_statements() -> dict[str, str]:
    """The panel's statements by id: the summary over all containers, the histogram of documents per container
    (``-1``: none; ``b``: ``2**b <= documents < 2**(b+1)``) and the containers with the most documents."""
    return {
        "containers": _PER_CONTAINER + "SELECT count(*) AS containers, count(*) FILTER (WHERE documents = 0) "
                      "AS without_documents, sum(documents) AS documents, sum(container_bytes) AS container_bytes, "
                      "sum(bytes) AS document_bytes, sum(tokens) AS tokens, min(documents) AS min_documents, "
                      "quantile_disc(documents, 0.5) AS p50_documents, max(documents) AS max_documents FROM c",
        "container_sizes": _PER_CONTAINER + "SELECT CAST(CASE WHEN documents = 0 THEN -1 ELSE "
                           "floor(log2(documents)) END AS INTEGER) AS log2_documents, count(*) AS containers "
                           "FROM c GROUP BY ALL ORDER BY log2_documents",
        "top_containers": _PER_CONTAINER + "SELECT path, documents, bytes, tokens, container_bytes, classes FROM c "
                          f"ORDER BY documents DESC, file_id LIMIT {_TOP_CONTAINERS}",
    }


def containers(ctx: Context) -> Panel:
    """Documents, bytes and tokens per container: a summary, a histogram and the largest containers (a records
    dataset only)."""
    p = Panel("containers", "Containers")
    statements = container_statements()
    summary = ctx.run(p, "containers", statements["containers"])
    p.parts.append(_table(summary, "containers"))
    hist = ctx.run(p, "container_sizes", statements["container_sizes"])
    top = ctx.run(p, "top_containers", statements["top_containers"])
    charts = []
    if hist:
        lo, hi = int(hist[0][0]), int(hist[-1][0])
        counts = np.zeros(hi - lo + 1, dtype=np.int64)
        for b, n in hist:
            counts[int(b) - lo] = n
        edges = ["0" if b < 0 else f"{2 ** b:,}" for b in range(lo, hi + 1)]
        charts.append(histogram("documents per container", edges, counts, color=PALETTE[0], unit="containers",
                                axis=(edges[0], f"{2 ** (hi + 1):,}")))
    if top:
        charts.append(hbars("documents (top containers)", [str(r[0]) for r in top], [r[1] for r in top],
                            lambda v: f"{int(v):,}", color=PALETTE[1]))
    p.parts.append(_charts(*charts))
    p.parts.append("<details><summary>histogram numbers</summary>" + _table(hist, "container_sizes") + "</details>")
    p.parts.append(f"<h3>The {_TOP_CONTAINERS} containers with the most documents</h3>" + _table(top, "top_containers"))
    p.notes.append(f"Documents of this dataset are {ctx.ds.spec.records.documents} records inside container files; "
                   "the other panels count documents. bytes and tokens: the documents' own; container_bytes: the "
                   "whole file. Columns of the histogram are powers of two: 2^b to 2^(b+1) documents.")
    return p
