"""Probe: the corpus report of a folder of ``--files`` small files (``metadata=None``, no content pass).

Measures, within one run:

- ``report_s``: writing the whole page (``render_report``), warm (the dataset built, its statements run once);
- ``sql_s``: running the page's own statements (read back from the page) through ``ds.sql``, warm; the ratio
  ``report_s / sql_s`` is the figure the report is held to (<= 3);
- ``page_bytes`` and the page size extrapolated to 10^6 files from a page at ``--files / 10``;
- the charts of the page drawn twice: hand-written SVG (:mod:`consumer.report.svg`) and matplotlib's SVG backend
  (when matplotlib is installed): bytes and seconds of each;
- ``records``: the same for a JSONL records dataset of ``--records`` documents in 16 shards (``class_field``), with
  the per-container panel's statements (joins of ``documents`` and ``files``) also timed alone.

Run: ``python benchmarks/probes/report.py --files 100000`` (or ``python -m benchmarks probe report``).
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from html.parser import HTMLParser
from typing import Any

import numpy as np

from benchmarks.measure import best_of

NAME = "report"
DESCRIPTION = "corpus report of 10^5 files: page time vs its SQL statements, page size, hand-written SVG vs matplotlib"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The probe's options."""
    parser.add_argument("--files", type=int, default=100_000, help="files of the corpus (default: %(default)s)")
    parser.add_argument("--classes", type=int, default=20, help="classes (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions, best kept (default: %(default)s)")
    parser.add_argument("--records", type=int, default=100_000,
                        help="documents of a JSONL records dataset also reported (0: none; default: %(default)s)")


def _write_jsonl(root: str, n: int, classes: int, shards: int = 16, seed: int = 0) -> str:
    """``shards`` JSONL files of ``n`` records in all: a ``text`` of 20 to ~2,000 bytes and a ``label``."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(500)]
    os.makedirs(root, exist_ok=True)
    per = -(-n // shards)
    for k in range(shards):
        lines = []
        for i in range(k * per, min(n, (k + 1) * per)):
            text = " ".join(words[j] for j in rng.integers(0, 500, int(rng.integers(5, 400))))
            lines.append(f'{{"text": "{text}", "label": "c{i % classes:02d}"}}\n')
        with open(os.path.join(root, f"shard{k:03d}.jsonl"), "w", encoding="ascii") as f:
            f.write("".join(lines))
    return root


def _records(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    """The report of a JSONL records dataset: page against its statements, and the per-container panel's own
    statements (joins of ``documents`` and ``files``) timed alone."""
    from consumer import Consumer
    from consumer.report import render_report

    out: dict[str, Any] = {"documents": args.records}
    ds = Consumer(_write_jsonl(os.path.join(tmp, "jsonl"), args.records, args.classes), documents="jsonl",
                  class_field="label", seqlen=1024, cache_dir=False)
    html = render_report(ds)
    parser = _Statements()
    parser.feed(html)
    found = parser.found
    containers = [v for k, v in found.items() if "container" in k]
    out["statements"], out["container_statements"] = len(found), len(containers)

    def run_all(statements: list[str]) -> None:
        for text in statements:
            ds.sql(text, timeout=None)

    out["sql_s"] = best_of(lambda: run_all(list(found.values())), args.repeat)
    out["containers_sql_s"] = best_of(lambda: run_all(containers), args.repeat)
    out["report_s"] = best_of(lambda: render_report(ds), args.repeat)
    out["report_over_sql"] = out["report_s"] / out["sql_s"]
    out["page_bytes"] = len(html.encode("utf-8"))
    return out


def _write_corpus(root: str, n: int, classes: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.lognormal(7.0, 1.6, n), 1 << 20).astype(np.int64)
    blob = rng.integers(0, 256, int(sizes.max()) + 1, dtype=np.uint8).tobytes()
    for c in range(classes):
        os.makedirs(os.path.join(root, f"class{c:02d}"), exist_ok=True)
    for i, size in enumerate(sizes.tolist()):
        with open(os.path.join(root, f"class{i % classes:02d}", f"f{i:07d}.bin"), "wb") as f:
            f.write(blob[:size])
    return root


class _Statements(HTMLParser):
    """The ``<pre id="sql-...">`` statements of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}
        self._key: str | None = None

    def handle_starttag(self, tag, attrs):
        key = dict(attrs).get("id") or ""
        if tag == "pre" and key.startswith("sql-"):
            self._key = key[4:]
            self.found[self._key] = ""

    def handle_endtag(self, tag):
        if tag == "pre":
            self._key = None

    def handle_data(self, data):
        if self._key is not None:
            self.found[self._key] += data


def _charts(ds: Any) -> dict[str, Any]:
    """The page's charts' numbers: per class files, bytes, samples, PAD %; per class log2 size histograms."""
    from consumer.report.queries import Queries

    q = Queries(ds.spec.style, ds.spec.long_files, int(ds.seqlen))
    per = ds.sql(q.per_class())
    hist: dict[str, np.ndarray] = {}
    for cls, b, n in ds.sql(q.sizes()):
        hist.setdefault(str(cls), np.zeros(32, dtype=np.int64))[b + 1] += n
    return {"labels": [r[0] for r in per], "files": [r[1] for r in per], "bytes": [r[2] for r in per],
            "samples": [r[4] for r in per], "pad": [r[5] for r in per], "hist": dict(list(hist.items())[:12])}


def _handwritten(data: dict[str, Any]) -> str:
    from consumer.dataset.display import human_bytes
    from consumer.report.svg import hbars, histogram

    edges = [f"2^{b - 1}" for b in range(32)]
    parts = [hbars("files", data["labels"], data["files"], lambda v: f"{int(v):,}"),
             hbars("bytes", data["labels"], data["bytes"], human_bytes),
             hbars("samples", data["labels"], data["samples"], lambda v: f"{int(v):,}"),
             hbars("PAD %", data["labels"], data["pad"], lambda v: f"{v:.2f}%")]
    parts += [histogram(c, edges, h) for c, h in data["hist"].items()]
    return "".join(parts)


def _matplotlib(data: dict[str, Any]) -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    out = []
    for key in ("files", "bytes", "samples", "pad"):
        fig, ax = plt.subplots(figsize=(3.2, 0.25 * len(data["labels"]) + 0.6))
        ax.barh(data["labels"], data[key])
        ax.set_title(key)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        plt.close(fig)
        out.append(buf.getvalue())
    for cls, h in data["hist"].items():
        fig, ax = plt.subplots(figsize=(2.7, 1.0))
        ax.bar(np.arange(h.size), h, width=1.0)
        ax.set_title(cls, fontsize=8)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        plt.close(fig)
        out.append(buf.getvalue())
    return "".join(out)


def run(args: argparse.Namespace) -> dict:
    """Build the corpus, then time the page against its statements and the two ways of drawing its charts."""
    from consumer import Consumer
    from consumer.report import render_report

    out: dict[str, Any] = {"files": args.files, "classes": args.classes}
    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        for n in (args.files // 10, args.files):
            t = time.perf_counter()
            ds = Consumer(_write_corpus(os.path.join(tmp, str(n)), n, args.classes), seqlen=1024, metadata=None,
                          cache_dir=False)
            out[f"build_s_{n}"] = time.perf_counter() - t
            t = time.perf_counter()
            html = render_report(ds)
            out[f"first_report_s_{n}"] = time.perf_counter() - t
            pages[n] = len(html.encode("utf-8"))
        parser = _Statements()
        parser.feed(html)
        statements = list(parser.found.values())

        def sql() -> None:
            for s in statements:
                ds.sql(s, timeout=None)

        out["statements"] = len(statements)
        out["sql_s"] = best_of(sql, args.repeat)
        out["report_s"] = best_of(lambda: render_report(ds), args.repeat)
        out["report_over_sql"] = out["report_s"] / out["sql_s"]
        small, big = args.files // 10, args.files
        out["page_bytes"] = pages[big]
        out["page_bytes_small"] = pages[small]
        per_file = max(pages[big] - pages[small], 0) / (big - small)
        out["page_bytes_at_1e6_extrapolated"] = int(pages[big] + per_file * (10**6 - big))
        data = _charts(ds)
        hand = _handwritten(data)
        out["svg_handwritten_bytes"] = len(hand.encode())
        out["svg_handwritten_s"] = best_of(lambda: _handwritten(data), args.repeat)
        mpl = _matplotlib(data)
        if mpl is not None:
            out["svg_matplotlib_bytes"] = len(mpl.encode())
            out["svg_matplotlib_s"] = best_of(lambda: _matplotlib(data), max(1, args.repeat // 2))
            out["matplotlib_over_handwritten_bytes"] = out["svg_matplotlib_bytes"] / out["svg_handwritten_bytes"]
            out["matplotlib_over_handwritten_s"] = out["svg_matplotlib_s"] / out["svg_handwritten_s"]
        if args.records:
            out["records"] = _records(args, tmp)
    return out


if __name__ == "__main__":
    import json

    p = argparse.ArgumentParser(description=DESCRIPTION)
    add_arguments(p)
    print(json.dumps(run(p.parse_args()), indent=1))
