"""The command line's options for documents inside containers (``--documents``, ``--text-field``, ``--class-field``,
``--on-bad-record``) and ``consumer index --raw-index FILE.jsonl`` (Modalities' raw index beside the file)."""

from __future__ import annotations

import argparse
from typing import Any

from ..formats.raw_index import raw_index_path, write_raw_index
from ..sources.records.options import BAD_RECORD_MODES, DOCUMENT_KINDS

__all__ = ["add_record_options", "record_options", "raw_index"]


def add_record_options(p: argparse.ArgumentParser) -> None:
    """Add the options saying what a document is."""
    p.add_argument("--documents", default="files", choices=list(DOCUMENT_KINDS),
                   help="what a document is: a whole file, or each line, JSON record, Parquet row or tar member of the "
                        "files (DIR may then be one file or a glob) (default: %(default)s)")
    p.add_argument("--text-field", default="text",
                   help="JSON key or Parquet column of the text, dotted for nested ones (default: %(default)s)")
    p.add_argument("--class-field", default=None,
                   help="JSON key or Parquet column of each document's class (default: classes from sub-folders)")
    p.add_argument("--on-bad-record", default="raise", choices=list(BAD_RECORD_MODES),
                   help="a record that cannot be read: stop with an error naming it, or skip and count it "
                        "(default: %(default)s)")


def record_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Consumer`` keywords of those options (``metadata`` only when given: its default follows the kind)."""
    out: dict[str, Any] = {"documents": args.documents, "text_field": args.text_field,
                           "class_field": args.class_field, "on_bad_record": args.on_bad_record}
    if args.metadata is not None:
        out["metadata"] = None if args.metadata == "none" else args.metadata
    return out


def raw_index(args: argparse.Namespace) -> int:
    """``consumer index --raw-index FILE.jsonl``: write ``<stem>.idx`` beside it (Modalities' ``create_raw_index``)."""
    n = write_raw_index(args.dir, drop_faulty_entries=args.on_bad_record == "skip")
    print(f"wrote {raw_index_path(args.dir)} ({n} entries)")
    return 0
