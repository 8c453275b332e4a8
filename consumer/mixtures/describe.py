"""What a mixture says about itself: its JSON description (``m.to_json``, ``Mixture.from_json``), the figures of its
parts (documents, tokens, samples, weights, epochs over a run) and its report (``m.report(path)``).

The description is ``m.get_dict(include_files)``: each part's own ``get_dict(include_files)`` under ``"mixture"``
and the mixture's settings (``weights`` as a dict, normalised, or None for the parts' natural sizes; ``sampling``,
``num_samples``, ``seed``, ``mode``). :func:`mixture_from_dict` rebuilds every part with ``Consumer.from_dict``
(so the description must list the files: ``include_files=True``) and then the mixture. Weights given as a
function of the step cannot be written as JSON and are refused, naming the value; a list of ``(step, weights)``
points is written as ``[[step, {part: weight}], ...]``.

The epochs a part goes through in a run of ``steps`` batches of ``batch_size`` samples are
``steps * batch_size * w_p / len(part)``: the samples drawn from the part over its samples. A part repeated more
than :data:`OVERSAMPLED` times gets a warning line on the report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..consumer import Consumer
from ..dataset.export import dump_json, load_json
from ..errors import InputError, short_repr
from ..util.fileio import atomic_write_bytes
from ..util.validate import check_int

Mixture = Any  # a consumer.mixtures.Mixture (mixture.py imports this module, never the other way)

__all__ = ["OVERSAMPLED", "epochs_per_part", "mixture_from_dict", "mixture_json", "part_figures", "render_report",
           "weights_json", "write_report"]

OVERSAMPLED = 4.0
"""A part drawn more than this many times over (epochs in a run) is flagged on the report."""


# ----------------------------------------------------------------- JSON
def weights_json(weights: Any) -> Any:
    """The weights as JSON values: None, a dict ``{part: weight}``, or a list of ``[step, {part: weight}]`` points;
    a function of the step is refused (it cannot be written down)."""
    if weights is None:
        return None
    if callable(weights):
        raise InputError(f"weights {short_repr(weights)} are a function of the step, which cannot be written as "
                         "JSON: give the mixture a dict, or a list of (step, weights) points, to describe it")
    if isinstance(weights, Mapping):
        return {str(k): float(v) for k, v in weights.items()}
    if isinstance(weights, (list, tuple)):
        out = []
        for point in weights:
            if not (isinstance(point, (list, tuple)) and len(point) == 2 and isinstance(point[1], Mapping)):
                raise InputError(f"weights: a schedule's point must be (step, {{part: weight}}), got "
                                 f"{short_repr(point)}")
            out.append([int(point[0]), {str(k): float(v) for k, v in point[1].items()}])
        return out
    raise InputError(f"weights {short_repr(weights)} cannot be written as JSON")


def mixture_json(m: Mixture, fp: Any = None, include_files: bool = False, *, weights: Any = None) -> str | None:
    """``m.get_dict(include_files)`` as indented JSON (written to ``fp`` and None returned when given), its
    ``weights`` those given to ``mix`` (``weights``: a dict, a list of points; a function is refused)."""
    d = m.get_dict(include_files=include_files)
    d["weights"] = weights_json(weights)
    return dump_json(d, fp)


def _points(weights: Any) -> Any:
    """JSON weights as ``mix`` takes them: a list of points becomes ``[(step, dict), ...]``."""
    if isinstance(weights, list):
        return [(p[0], p[1]) if isinstance(p, list) and len(p) == 2 else p for p in weights]
    return weights


def mixture_from_dict(d: Any, *, cache_dir: Any = None, verbose: bool = False
                      ) -> tuple[dict[str, Consumer], dict[str, Any]]:
    """What the mixture a ``get_dict(include_files=True)`` (or its ``to_json`` text or file) describes is made of:
    its parts, each rebuilt by ``Consumer.from_dict`` (the same files and settings, hence the same samples), and the
    keywords of ``mix`` (the same weights, sampling, ``num_samples`` and seed) with ``mode``."""
    d = d if isinstance(d, dict) else load_json(d)
    described = d.get("mixture") if isinstance(d, dict) else None
    if not isinstance(described, dict) or not described:
        raise InputError("d must be a dict made by a mixture's get_dict(include_files=True) (its parts under "
                         f"'mixture'), got {short_repr(d)}")
    parts: dict[str, Consumer] = {}
    for name, part in described.items():
        if not isinstance(part, dict) or not part.get("files"):
            raise InputError(f"part {name!r} of the description does not list its files: write the mixture with "
                             "to_json(include_files=True) (or get_dict(include_files=True)) to rebuild it")
        parts[name] = Consumer.from_dict(part, cache_dir=cache_dir, verbose=verbose)
    return parts, {"weights": _points(d.get("weights")), "sampling": d.get("sampling"),
                   "num_samples": d.get("num_samples"), "seed": d.get("seed"), "mode": d.get("mode")}


# ----------------------------------------------------------------- figures
def part_figures(m: Mixture) -> list[dict[str, Any]]:
    """One dict per part: ``part``, ``documents``, ``tokens`` (the documents' tokens), ``samples`` (rows), their
    shares of the mixture's (``documents_share``, ``tokens_share``) and ``weight`` (the normalised weight)."""
    weights = m.weights
    rows = []
    for name, part in m.parts.items():
        docs = part.documents
        rows.append({"part": name, "documents": len(docs), "tokens": int(np.asarray(docs.doc_len, np.int64).sum()),
                     "samples": len(part), "weight": float(weights.get(name, 0.0))})
    total_docs = sum(r["documents"] for r in rows)
    total_tokens = sum(r["tokens"] for r in rows)
    for r in rows:
        r["documents_share"] = r["documents"] / total_docs if total_docs else 0.0
        r["tokens_share"] = r["tokens"] / total_tokens if total_tokens else 0.0
    return rows


def epochs_per_part(m: Mixture, steps: int, batch_size: int) -> dict[str, float]:
    """``{part: steps * batch_size * w_p / len(part)}``: how many times over a run draws each part (0 for a part of
    weight 0)."""
    steps = check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    out = {}
    for name, n in m.samples_per_class().items():
        w = float(m.weights.get(name, 0.0))
        out[name] = 0.0 if w == 0 else (math.inf if n == 0 else steps * batch_size * w / n)
    return out


def render_report(m: Mixture, steps: int | None = None, batch_size: int | None = None) -> str:
    """The mixture's report as one self-contained HTML page (see :func:`write_report`)."""
    from ..report.page import Panel, page, table  # noqa: PLC0415  (the report package loads when a report is made)
    if (steps is None) != (batch_size is None):
        raise InputError(f"give both steps and batch_size (or neither), got steps={short_repr(steps)}, "
                         f"batch_size={short_repr(batch_size)}")
    rows = part_figures(m)
    parts = Panel("parts", "Parts", notes=[
        "Each part's documents, tokens and samples (rows), their shares of the mixture's, and its weight "
        "(the share of the samples a batch draws from it)."])
    parts.parts.append(table(
        ["part", "documents", "share of documents", "tokens", "share of tokens", "samples", "weight"],
        [[r["part"], r["documents"], f"{100 * r['documents_share']:.1f}%", r["tokens"],
          f"{100 * r['tokens_share']:.1f}%", r["samples"], f"{r['weight']:.4f}"] for r in rows],
        source="mixture-parts"))
    panels = [parts]
    if steps is not None and batch_size is not None:
        epochs = epochs_per_part(m, steps, batch_size)
        run = Panel("epochs", "Epochs in the run", notes=[
            f"{steps:,} steps of {batch_size:,} samples: each part goes through steps * batch_size * weight / "
            "samples epochs."])
        run.parts.append(table(["part", "weight", "samples drawn", "samples", "epochs"],
                               [[r["part"], f"{r['weight']:.4f}", int(round(steps * batch_size * r["weight"])),
                                 r["samples"], f"{epochs[r['part']]:.2f}"] for r in rows], source="mixture-epochs"))
        for name, e in epochs.items():
            if e > OVERSAMPLED:
                run.notes.append(f"Warning: part {name!r} is repeated {e:.1f} times (more than {OVERSAMPLED:g}): "
                                 "its samples are seen that many times over.")
        panels.append(run)
    sizes = ", ".join(f"{r['part']} ({r['samples']:,} samples)" for r in rows)
    return page(f"Mixture report: {len(rows)} parts", sizes, panels)


def write_report(m: Mixture, path: Any, steps: int | None = None, batch_size: int | None = None) -> str:
    """Write the mixture's report to ``path`` (one HTML file, written atomically); returns the path."""
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"path must be a file path (str or os.PathLike), got {short_repr(path)}")
    atomic_write_bytes(path, render_report(m, steps, batch_size).encode("utf-8"))
    return os.fspath(path)
