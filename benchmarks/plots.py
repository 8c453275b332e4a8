"""PNG plots of one run's results (matplotlib, from the ``[bench]`` extra).

:func:`make_plots` returns the written files (relative to the report's folder) and a note; without
matplotlib it writes nothing and says so in the note.
"""

from __future__ import annotations

import os

__all__ = ["make_plots"]


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(label: str) -> dict:
    if label.startswith("consumer"):
        return {"linewidth": 2.4, "marker": "o"}
    if "limit" in label or "transport" in label:
        return {"linestyle": "--", "color": "grey" if "memcpy" in label or "transport" in label else "black",
                "linewidth": 1.2}
    return {"linewidth": 1.3, "marker": "s", "markersize": 4}


def _fetch_vs_batch(plt, res: dict, path: str) -> bool:
    keys = [k for k in ("small-diff", "small-concat", "lognormal-concat") if k in res.get("workloads", {})]
    if not keys:
        return False
    fig, axes = plt.subplots(1, len(keys), figsize=(5.2 * len(keys), 4.2), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        w = res["workloads"][key]
        sizes = sorted(w["batch"], key=int)
        labels = list(dict.fromkeys(lb for s in sizes for lb in w["batch"][s]["systems"]))
        for label in labels:
            xs, ys = [], []
            for s in sizes:
                row = w["batch"][s]["systems"].get(label)
                if row and row.get("per_rep"):
                    xs.append(int(s))
                    ys.append(int(s) / row["median_s"])
            if xs:
                ax.plot(xs, ys, label=label, **_style(label))
        _log_axes(ax, "batch size (samples)", "samples / s", f"{key}, seqlen 8192, n_bytes 2")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(plt, fig, path)


def _log_axes(ax, xlabel: str, ylabel: str, title: str, *, log_x: bool = True) -> None:
    """Log-scaled axes (x too unless ``log_x=False``) with labels, a title and a light grid."""
    if log_x:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def _save(plt, fig, path: str) -> bool:
    """Lay out, write ``path`` (PNG) and close ``fig``; True (the plot was written)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _fetch_vs_filesize(plt, res: dict, path: str) -> bool:
    fs = res.get("filesize")
    if not fs:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.2), squeeze=False)
    for ax, style in zip(axes[0], ("diff", "concat"), strict=True):
        for label in dict.fromkeys(r["system"] for r in fs):
            pts = sorted((r["mean_file_bytes"], r["tokens_per_s"]) for r in fs
                         if r["style"] == style and r["system"] == label)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **_style(label))
        _log_axes(ax, "mean file size (bytes)", "real tokens / s", f"{style}: 20 x 8192, n_bytes 2")
        ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _loader_vs_workers(plt, res: dict, path: str) -> bool:
    ld = res.get("loader")
    if not ld or not ld.get("systems"):
        return False
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    for label, per_w in ld["systems"].items():
        pts = sorted((int(w), v["batches_per_s"]) for w, v in per_w.items())
        if len(pts) == 1:
            ax.axhline(pts[0][1], label=label, linestyle=":", color="tab:green", linewidth=1.6)
        elif pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **_style(label))
    _log_axes(ax, "worker processes", f"batches / s ({ld['batch']} x {ld['seqlen']} int64)",
              "loader throughput into the training loop", log_x=False)
    ax.set_xticks(sorted({int(w) for v in ld["systems"].values() for w in v}))
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(plt, fig, path)


def _build_vs_size(plt, res: dict, path: str) -> bool:
    sc = res.get("scale")
    if not sc:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), squeeze=False)
    series = {"consumer cold, no libmagic": ("plain", "cold"), "consumer warm reopen": ("plain", "warm"),
              "consumer cold, libmagic": ("magic", "cold"), "consumer warm reopen (libmagic)": ("magic", "warm")}
    for label, (kind, which) in series.items():
        pts = [(r["files"], r[kind][which]) for r in sc if kind in r and "wall_s" in r[kind][which]]
        if pts:
            axes[0][0].plot([p[0] for p in pts], [p[1]["wall_s"] for p in pts], label=label, **_style(label))
            axes[0][1].plot([p[0] for p in pts], [p[1]["peak_rss_mb"] for p in pts], label=label, **_style(label))
    g = [(r["files"], r["gperc"]) for r in sc if "wall_s" in r.get("gperc", {})]
    if g:
        axes[0][0].plot([p[0] for p in g], [p[1]["wall_s"] for p in g], label="gperc 0.7", **_style("gperc"))
        axes[0][1].plot([p[0] for p in g], [p[1]["peak_rss_mb"] for p in g], label="gperc 0.7", **_style("gperc"))
    for ax, ylabel, title in zip(axes[0], ("seconds", "peak RSS (MB)"),
                                 ("build time vs corpus size", "peak RSS of the build process"), strict=True):
        _log_axes(ax, "files", ylabel, title)
        ax.legend(fontsize=8)
    return _save(plt, fig, path)


def _bars(ax, labels: list[str], values: list[float], title: str, ylabel: str, line: float | None = None,
          log: bool = False) -> None:
    """One bar per label (ours highlighted), an optional dashed reference line (a target or a peer)."""
    colors = ["tab:blue" if lb.startswith(("consumer", "loader")) else "tab:gray" for lb in labels]
    ax.bar(range(len(labels)), values, color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize=8)
    if line is not None:
        ax.axhline(line, color="black", linestyle="--", linewidth=1)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.5)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)


def _cold_fetch(plt, res: dict, path: str) -> bool:
    readers = (((res.get("coldfetch") or {}).get("runs") or {}).get("") or {}).get("results", {}).get("readers")
    if not readers:
        return False
    fetchers = {k: v for k, v in readers.items() if v.get("x_pread") is not None}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), squeeze=False)
    _bars(axes[0][0], list(fetchers), [v["x_pread"] for v in fetchers.values()], "cold random fetch, × the pread floor",
          "time ÷ pread (same trial)", 1.3)
    _bars(axes[0][1], list(readers), [max(v["amplification"], 1e-3) for v in readers.values()],
          "bytes read from the device per byte served", "read amplification (log)", 2.0, log=True)
    return _save(plt, fig, path)


def _catalog(plt, res: dict, path: str) -> bool:
    runs = (res.get("coldcatalog") or {}).get("runs") or {}
    sizes = {sub: d["results"] for sub, d in runs.items() if isinstance(d.get("results"), dict)}
    if not sizes:
        return False
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2), squeeze=False)
    for ax, (sub, r) in zip(axes[0], sizes.items(), strict=True):
        got = {k: r[k]["seconds"] for k in ("consumer_nocache", "consumer_cache", "daft", "duckdb")
               if isinstance(r.get(k), dict) and "seconds" in r[k]}
        _bars(ax, list(got), list(got.values()), f"cold catalog to the first GROUP BY, {r.get('files', sub):,} files",
              "seconds (fresh process)", got.get("daft"))
    return _save(plt, fig, path)


def _open_scale(plt, res: dict, path: str) -> bool:
    from .views.open_scale import series

    lines = series(res)
    if not lines:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), squeeze=False)
    for label, pts in lines.items():
        style = _style(label)
        if "reopen" in label or "IndexedDataset" in label:
            style = {**style, "linestyle": "--"}
        axes[0][0].plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
        mem = [(p[0], p[2] / 2 ** 20) for p in pts if p[2]]
        if mem:
            axes[0][1].plot([p[0] for p in mem], [p[1] for p in mem], label=label, **style)
    _log_axes(axes[0][0], "documents in the store", "seconds (fresh process)", "open a .bin/.idx store")
    _log_axes(axes[0][1], "documents in the store", "MiB beyond imports (peak for first builds)",
              "memory of the open")
    axes[0][1].legend(fontsize=7, loc="upper left")
    return _save(plt, fig, path)


def make_plots(res: dict, img_dir: str, rel_prefix: str) -> tuple[list[str], str]:
    """Write the PNGs into ``img_dir``; return their paths as ``rel_prefix/<name>`` and a note."""
    try:
        plt = _mpl()
    except ImportError:
        return [], "Plots skipped: matplotlib is not installed (`pip install -e \".[bench]\"`)."
    os.makedirs(img_dir, exist_ok=True)
    written = []
    for name, fn in (("fetch_vs_batch.png", _fetch_vs_batch), ("fetch_vs_filesize.png", _fetch_vs_filesize),
                     ("loader_vs_workers.png", _loader_vs_workers), ("build_vs_size.png", _build_vs_size),
                     ("cold_fetch.png", _cold_fetch), ("catalog_vs_daft.png", _catalog),
                     ("open_scale.png", _open_scale)):
        if fn(plt, res, os.path.join(img_dir, name)):
            written.append(f"{rel_prefix}/{name}" if rel_prefix else name)
    return written, ""
