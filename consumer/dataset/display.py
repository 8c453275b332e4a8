"""How a dataset shows itself: a one-line ``repr`` and a rich HTML summary for notebooks.

:func:`text_repr` is the concise ``repr(ds)``; :func:`repr_html` is ``ds._repr_html_()`` (Jupyter calls
it): the settings, a table of classes (files, bytes, tokens and samples per class, from
``ds.get_dict()``) and a summary of the vocabulary. Every value is HTML-escaped, so class names and
paths such as ``<script>`` are shown, never interpreted. Nothing here reads a file or imports the facade.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..tokens.index import long_files_choices

__all__ = ["repr_html", "text_repr", "human_bytes", "MAX_CLASS_ROWS", "MAX_REPR_CLASSES"]

MAX_CLASS_ROWS = 50   # class rows shown in the HTML table (the total row always covers every class)
MAX_REPR_CLASSES = 6  # class names listed in repr(); more classes are shown as a count


def text_repr(ds: Any) -> str:
    """The concise ``repr`` of a dataset: the settings that shape a batch, classes, files and samples.

    Non-default extras (``long_files``, Megatron sampling, ``documents``, the mode) appear only when set, e.g.
    ``Consumer(style='diff', n_bytes=2, seqlen=512, classes=['cat', 'dog'], files=17, samples=17)``; a dataset of
    documents inside container files counts them as ``records`` (``documents='jsonl', ..., records=2000``).
    """
    classes = list(ds.classes)
    shown = repr(classes) if len(classes) <= MAX_REPR_CLASSES else str(len(classes))
    size = ds.spec.vocab_size  # a store another tool wrote: its ids are not bytes
    parts = [f"style={ds.style!r}", f"n_bytes={ds.vocab.n_bytes}" if size is None else f"vocab_size={size}",
             f"seqlen={ds.seqlen}"]
    if ds.long_files != long_files_choices(ds.style)[0]:  # not the style's default
        parts.append(f"long_files={ds.long_files!r}")
    if ds.spec.megatron:
        parts.append("sampling='megatron'")
    kind = ds.spec.records.documents
    if kind != "files":  # documents inside container files: one per record, line, row or member
        parts.append(f"documents={kind!r}")
    parts += [f"classes={shown}", f"{'files' if kind == 'files' else 'records'}={len(ds.files)}", f"samples={len(ds)}"]
    mode = ds.mode
    if mode is not None:
        parts.append(f"mode={mode!r}")
    return f"{type(ds).__name__}({', '.join(parts)})"


def _num(n: int) -> str:
    return f"{int(n):,}"


def human_bytes(n: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KB``, ``48.2 MB`` (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)  # pragma: no cover


def _row(cells: list[Any], tag: str = "td", cls: str | None = None) -> str:
    attr = f' class="{escape(cls)}"' if cls else ""
    return f"<tr{attr}>" + "".join(f"<{tag}>{escape(str(c))}</{tag}>" for c in cells) + "</tr>"


def _kv(key: str, value: Any) -> str:
    return f"<tr><th>{escape(key)}</th><td>{escape(str(value))}</td></tr>"


def _settings(info: dict, build: dict | None) -> list[tuple[str, Any]]:
    seqlen = str(info["seqlen"])
    if isinstance(info["seqlen_requested"], str):
        seqlen += f" (from {info['seqlen_requested']!r})"
    sampling = info["sampling"]
    rows: list[tuple[str, Any]] = [
        ("style", info["style"]), ("n_bytes", info["n_bytes"]), ("seqlen", seqlen),
        ("long_files", info["long_files"]),
        ("sampling", sampling if isinstance(sampling, str) else
         ", ".join(f"{k}={v}" for k, v in sampling.items())),
        ("metadata", info["metadata"]), ("seed", info["seed"]), ("input form", info["data_mode"]),
        ("mode (default query)", info["mode"] if info["mode"] is not None else "none"),
    ]
    if info["mode"] is not None:
        m = info["mask"]
        rows.append(("masking", f"frequency={m['frequency']}, rule={m['rule']}, add_cls={m['add_cls']}"))
    if "batches" in info:
        rows.append(("batches", ", ".join(f"{k}={v}" for k, v in info["batches"].items())))
    if build:
        rows.append(("built", f"index cache {build.get('cache')}, libmagic calls {build.get('libmagic_calls')}, "
                              f"{build.get('seconds', 0.0):.2f} s"))
    rows.append(("consumer version", info["consumer_version"]))
    return rows


def repr_html(ds: Any) -> str:
    """An HTML summary of a dataset for notebooks (``_repr_html_``): settings, classes, vocabulary.

    The class table has one row per class (class, id, files, bytes, tokens, samples; at most
    :data:`MAX_CLASS_ROWS` rows, then a row saying how many are not shown) and a total row.
    """
    info = ds.get_dict()
    per = info["per_class"]
    total = {k: sum(p[k] for p in per.values()) for k in ("files", "bytes", "tokens", "samples")}
    out = ['<div class="consumer-repr">',
           f"<p><strong>{escape(type(ds).__name__)}</strong>: {_num(info['n_classes'])} classes, "
           f"{_num(total['files'])} files ({escape(human_bytes(total['bytes']))}), {_num(info['total_samples'])} "
           f"samples of {_num(info['seqlen'])} tokens</p>",
           '<table class="consumer-settings"><caption>settings</caption><tbody>']
    out += [_kv(k, v) for k, v in _settings(info, getattr(ds, "build_info", None))]
    out.append("</tbody></table>")
    out.append('<table class="consumer-classes"><caption>classes</caption><thead>')
    out.append(_row(["class", "id", "files", "bytes", "tokens", "samples"], "th"))
    out.append("</thead><tbody>")
    names = list(info["classes"])
    for c in names[:MAX_CLASS_ROWS]:
        p = per[c]
        out.append(_row([c, info["class_to_id"][c], _num(p["files"]), _num(p["bytes"]), _num(p["tokens"]),
                         _num(p["samples"])]))
    if len(names) > MAX_CLASS_ROWS:
        out.append(f'<tr class="more"><td colspan="6">... {_num(len(names) - MAX_CLASS_ROWS)} more classes '
                   "not shown (ds.get_dict()['per_class'] has them all)</td></tr>")
    out.append(_row(["(all)", "", _num(total["files"]), _num(total["bytes"]), _num(total["tokens"]),
                     _num(total["samples"])], cls="total"))
    out.append("</tbody></table>")
    v = info["vocab"]
    specials = ", ".join(f"{name}={i}" for name, i in v["specials"].items())
    out.append('<table class="consumer-vocab"><caption>vocabulary</caption><tbody>')
    for k, val in (("size", _num(v["size"])), ("n_bytes", v["n_bytes"]),
                   ("data ids", f"0 .. {_num(v['n_data'] - 1)}"), ("special ids", specials)):
        out.append(_kv(k, val))
    out.append("</tbody></table></div>")
    return "\n".join(out)
