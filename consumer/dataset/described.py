"""``Consumer.from_dict``: the dataset a ``get_dict(include_files=True)`` describes, built again from its files."""

from __future__ import annotations

from typing import Any

from ..errors import FileChangedError, InputError, short_repr
from ..spec import Metadata, Spec
from ..storage import Storage
from .build import Built, build
from .export import load_json

__all__ = ["build_from_dict"]


def build_from_dict(d: Any, *, cache_dir: Any = None, verbose: bool = False,
                    metadata: Metadata | None = None) -> Built:
    """The dataset a ``get_dict(include_files=True)`` (or its JSON) describes: the same files, classes and
    settings, hence the same samples (``d`` may also be its ``to_json`` text or file). FileChangedError when a
    file's size differs from the listing."""
    d = d if isinstance(d, dict) else load_json(d)
    if not isinstance(d, dict) or not isinstance(d.get("files"), list) or not d["files"]:
        raise InputError("d must be a dict made by get_dict(include_files=True) (it lists the files), got "
                         f"{short_repr(d)}")
    spec = Spec.from_dict(d, metadata)
    listed = "containers" if spec.records.records else "files"  # records: rebuilt from their containers
    grouped: dict[str, list[str]] = {}
    for i, item in enumerate(d.get(listed) or []):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and isinstance(item[2], str)):
            raise InputError(f"d[{listed!r}][{i}] must be [path, size, class], got {short_repr(item)}")
        grouped.setdefault("null" if spec.records.class_field else item[2], []).append(item[0])
    if not grouped:
        raise InputError(f"d must list its {listed} (get_dict(include_files=True)), got {short_repr(d)}")
    built = build(grouped, spec, Storage.of(cache_dir=cache_dir), verbose=verbose)
    sizes = {p: s for p, s, _ in d["files"]}
    docs = built.documents
    for p, s in zip(docs.paths, docs.doc_size.tolist()):
        if sizes.get(p) != s:
            raise FileChangedError(f"{p!r}: size {s} bytes, the description says {sizes.get(p)}")
    return built
