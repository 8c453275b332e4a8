"""*Peer readers on a records dataset's packed stores* (suite section ``recinterop``, probe ``records_interop``)."""

from __future__ import annotations

from ..markdown import table
from .probe_doc import head, results, verdict

__all__ = ["render_section", "verdicts"]

_INTRO = ("A JSONL records dataset (realistic records, classes from the `lang` field) packed in both formats for "
          "`n_bytes` 1 and 2, every document read back with the peers' own readers (megatron-core's "
          "`IndexedDataset.get(i)`, Modalities' `PackedMemMapDatasetBase(...)[i][\"input_ids\"]`) and compared with "
          "`ds.document_tokens(i)`, its decoded bytes with the UTF-8 of the record's text. The read rates swing with "
          "the machine's load; the zero mismatches are the point.")
_STORES = {"megatron": "`.bin/.idx`", "modalities": "`.pbin`"}


def _stores(r: dict) -> list[tuple[str, dict]]:
    return [(k, v) for k, v in r.items() if isinstance(v, dict) and "_n_bytes_" in k]


def render_section(res: dict) -> list[str]:
    """The report's lines of this section."""
    out = head("Peer readers on a records dataset's packed stores (#26)", res, "recinterop", _INTRO)
    r = results(res, "recinterop")
    if r is None:
        return out
    out += [f"{r.get('records', 0):,} records, {r.get('jsonl_mb')} MB of JSONL.", ""]
    rows = []
    for key, s in _stores(r):
        fmt_, n_bytes = key.split("_n_bytes_")
        store = f"{_STORES.get(fmt_, fmt_)}, `n_bytes={n_bytes}`"
        if "skipped" in s:
            rows.append([store, fmt_, f"not measured: {s['skipped'][:100]}", "", "", ""])
        else:
            rows.append([store, str(s.get("peer")), f"{s.get('documents', 0):,}", str(s.get("mismatches")),
                         str(s.get("peer_dtype")), f"{s.get('peer_docs_per_s', 0):,}"])
    return out + table(["store", "peer", "documents read", "mismatches", "peer's token dtype",
                        "peer reads, documents/s"], rows) + [""]


def verdicts(res: dict) -> list[dict]:
    """Every document a peer reads equals ours."""
    r = results(res, "recinterop")
    if r is None:
        return []
    read = [s for _, s in _stores(r) if "mismatches" in s]
    bad = sum(s["mismatches"] + abs(s.get("expected_documents", 0) - s.get("documents", 0)) for s in read)
    return [verdict("records packed for megatron-core / Modalities read back identical by their own readers",
                    f"{len(read)} stores, {bad} mismatched or missing documents" if read else None, bad == 0)]
