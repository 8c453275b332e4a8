"""The ``consumer`` command line (console script and ``python -m consumer``).

- ``consumer demo``: a :class:`~consumer.Consumer` over files every machine with Python has (the
  standard library, grouped by file type): a summary and a decoded batch;
- ``consumer index DIR``: build or refresh the catalog and the sample index (with progress);
- ``consumer info DIR``: classes, files, bytes, samples, the share of PAD in the rows, top MIME types,
  file-size distribution;
- ``consumer sql DIR "SELECT ..."``: a table, or ``--format csv|json``;
- ``consumer pack DIR PREFIX --format megatron|modalities``: a packed store of every file's tokens;
- ``consumer inspect PREFIX``: counts, dtype, classes and a decoded document of a packed store;
- ``consumer cache list|clear``.

Exit codes: 0 ok, 2 bad input (one line on stderr), 1 a system error (one line on stderr).

Every option's help shows its default and every subcommand's ``--help`` ends with a worked example.
``index``, ``info``, ``sql`` and ``pack`` show a progress bar on stderr while libmagic runs (only when
stderr is a terminal; ``--quiet`` turns it off, ``--verbose`` forces it) and end with a one-line
summary (files, bytes, index cache hit or miss, libmagic calls, time). Warnings of the library
(e.g. ``seqlen="auto"`` padding most of every row) are printed as one ``consumer: warning:`` line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import warnings

from .._version import __version__
from ..errors import ConsumerError, ConsumerWarning, InputError
from ..tokens.index import check_seqlen
from . import commands as commands
from . import report_cmd
from .commands import content_summary, stdlib_corpus
from .records import add_record_options

__all__ = ["main", "stdlib_corpus", "content_summary"]


_SEQLEN_HELP = ("tokens per sample: an int, 'auto' (the longest document) or 'auto:pNN' (the NN-th percentile "
                "of document lengths, e.g. auto:p95)")
_EXAMPLES = {
    "merge": ("consumer merge packed/corpus packed/part0 packed/part1 packed/part2",
              "joins 'consumer pack corpus/ packed/partI --shard I/3' (one per machine) into one store, byte for "
              "byte the pack of the whole corpus; --catalogs joins cache directories of 'consumer index --shard'"),
    "demo": ("consumer demo --style concat --seqlen 1024 --n-bytes 1",
             "a Consumer over the Python standard library (one class per file type) and a decoded batch"),
    "index": ("consumer index corpus/ --seqlen 2048 --long-files windows",
              "builds the catalog and the sample index of corpus/ (sub-folders are classes); the next run "
              "with the same settings is a cache hit"),
    "info": ("consumer info corpus/ --style concat --seqlen 2048 --top 5",
             "classes, files, bytes, tokens, samples and % PAD, the 5 most frequent MIME types, file sizes, "
             "entropy/printable per class and duplicate groups"),
    "sql": ('consumer sql corpus/ "SELECT class, count(*) AS files, sum(size) AS bytes FROM files '
            'GROUP BY class" --format csv',
            "files and bytes per class as CSV (the view `files` has file_id, path, class, class_id, size, "
            "mtime_ns, extension, description, mime, header, sha256, tokens, samples, entropy, printable, "
            "zeros, histogram)"),
    "pack": ("consumer pack corpus/ packed/corpus --format megatron",
             "writes packed/corpus.bin and .idx (Megatron-LM) plus packed/corpus.consumer.json/.npz; "
             "open it with Consumer.from_packed('packed/corpus', ...)"),
    "inspect": ("consumer inspect packed/corpus --tokens 32",
                "counts, dtype, classes and the first 32 tokens of the first document of the store"),
    "verify": ("consumer verify packed/corpus",
               "re-reads every token: each chunk's crc32c (every damaged chunk listed), the sha256 recorded at pack "
               "time and every id < vocab size; exit 2 if not"),
    "report": report_cmd.EXAMPLE,
    "cache": ("consumer cache list --cache-dir /data/cache",
              "the cached indexes (key, style, n_bytes, files, samples, size, date) and the catalog size"),
}


def _example(command: str) -> str:
    line, what = _EXAMPLES[command]
    return f"example:\n  {line}\n      {what}"


def _seqlen(text: str):
    """argparse type of ``--seqlen``: a positive int, ``auto`` or ``auto:pNN`` (argparse names the option)."""
    try:
        return check_seqlen(int(text) if text.lstrip("+-").isdigit() else text)
    except InputError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer, 'auto' or 'auto:pNN' (e.g. auto:p95), got {text!r}") from None


def _int_at_least(low: int):
    """argparse type of an integer option that must be >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


def _add_dataset_options(p: argparse.ArgumentParser, seqlen_default: int | str = "auto") -> None:
    p.add_argument("--style", default="diff", choices=["diff", "concat", "packed"],
                   help="diff: one padded sample per file; packed: per class whole files placed into rows by "
                        "best-fit decreasing; concat: per class one token stream cut into exact windows "
                        "(default: %(default)s)")
    p.add_argument("--n-bytes", type=int, default=2, choices=[1, 2, 3],
                   help="bytes per token (default: %(default)s)")
    p.add_argument("--seqlen", type=_seqlen, default=seqlen_default, help=_SEQLEN_HELP + " (default: %(default)s)")
    p.add_argument("--long-files", default=None, choices=["truncate", "windows"],
                   help="diff and packed styles: serve the first seqlen tokens of a long file, or all of it as "
                        "consecutive windows; with --style packed the default is windows (no byte lost), else "
                        "(default: truncate)")


def _add_corpus_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the corpus directory, or a URL prefix (s3://, gs://, az://, https://): each "
                               "sub-folder is a class (a folder without sub-folders is one class, 'null')")
    _add_dataset_options(p)
    p.add_argument("--metadata", default=None, choices=["file", "mime", "none"],
                   help="header in front of each file: the libmagic description, the MIME type, or none "
                        "(default: file) (with --documents lines, jsonl or parquet: none)")
    add_record_options(p)
    p.add_argument("--skip-bad-files", action="store_true",
                   help="leave broken symlinks, symlink loops, special files (FIFOs, sockets, devices) and "
                        "unreadable files of DIR out, counted in the summary, instead of stopping at the first "
                        "(default: off)")
    p.add_argument("--cache-dir", default=None,
                   help="where the catalog and the index cache live; 'off' keeps everything in memory "
                        "(default: $CONSUMER_CACHE_DIR, else ~/.cache/consumer)")
    p.add_argument("--storage-options", type=_storage_options, default=None, metavar="JSON",
                   help="fsspec options when DIR is a URL, e.g. '{\"endpoint_url\": \"http://host:9000\"}' "
                        "(default: credentials from the environment)")
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("--quiet", action="store_true",
                      help="no progress bar and no summary line; warnings and errors still show (default: off; "
                           "the bar shows only when stderr is a terminal)")
    loud.add_argument("--verbose", action="store_true",
                      help="progress bars even when stderr is not a terminal, e.g. in a log (default: off)")


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"expected I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
    return i, n


def _add_shard_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                   help="handle only shard I of N of the files (a hash of each path); join the shards with "
                        "'consumer merge' (default: all files)")


def _add_scheduler_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run stat, libmagic, the content pass (and pack's reads) on the Dask cluster whose scheduler "
                        "is at ADDR, e.g. tcp://HOST:8786; needs the [dask] extra (default: none, all on this machine)")


def _subparser(sub, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".",
                          epilog=_example(name), formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    # long: one declaration per subcommand, in --help order; splitting it would scatter one table over functions
    """The argument parser of the ``consumer`` command."""
    p = argparse.ArgumentParser(prog="consumer", description="Training batches from the raw bytes of files.",
                                epilog="Run 'consumer COMMAND --help' for a command's options and an example.")
    p.add_argument("--version", action="version",
                   version=f"consumer {__version__} (Python {platform.python_version()})",
                   help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = _subparser(sub, "demo", "build a Consumer over the Python standard library and show a batch")
    d.add_argument("--dir", default=None,
                   help="use this directory (sub-folders = classes) instead of the standard library "
                        "(default: the standard library)")
    _add_dataset_options(d, seqlen_default=512)
    d.add_argument("--max-files", type=_int_at_least(1), default=200,
                   help="files per class at most (default: %(default)s)")
    d.add_argument("--batch-size", type=_int_at_least(1), default=8, help="rows of the batch (default: %(default)s)")
    d.add_argument("--show", type=_int_at_least(0), default=3, help="rows to decode (default: %(default)s)")
    d.add_argument("--chars", type=_int_at_least(0), default=240,
                   help="decoded bytes shown per row (default: %(default)s)")
    d.add_argument("--verbose", action="store_true", help="progress bar while libmagic runs (default: off)")
    d.add_argument("--report", default=os.path.join(tempfile.gettempdir(), "consumer-demo-report.html"),
                   help="the corpus report written at the end (default: %(default)s)")
    d.set_defaults(func=commands.demo)
    i = _subparser(sub, "index", "build or refresh the catalog and the sample index of a directory")
    _add_corpus_options(i)
    _add_shard_option(i)
    _add_scheduler_option(i)
    i.add_argument("--raw-index", action="store_true",
                   help="DIR is a JSONL file: write Modalities' raw index <stem>.idx beside it and stop (default: off)")
    i.set_defaults(func=commands.index)
    n = _subparser(sub, "info", "classes, files, bytes, samples, padding, top MIME types and file sizes of a directory")
    _add_corpus_options(n)
    n.add_argument("--top", type=_int_at_least(1), default=10, help="MIME types shown (default: %(default)s)")
    n.add_argument("--no-content", action="store_true",
                   help="skip the content summary (entropy and printable percentiles per class, duplicates), "
                        "which reads every file once, the first time (default: off)")
    _add_scheduler_option(n)
    n.set_defaults(func=commands.info)
    q = _subparser(sub, "sql", "run a read-only SQL statement over the files view of a directory")
    _add_corpus_options(q)
    q.add_argument("statement", help='one SELECT statement over the view files, e.g. '
                                     '"SELECT class, count(*), sum(size) FROM files GROUP BY class"')
    q.add_argument("--timeout", type=float, default=60.0,
                   help="seconds the statement may run before it is stopped; 0 for no limit (default: %(default)s)")
    q.add_argument("--format", default="table", choices=["table", "csv", "json", "parquet"],
                   help="output: an aligned table, CSV with a header row, a JSON list of objects, or a Parquet "
                        "file (needs -o) (default: %(default)s)")
    q.add_argument("-o", "--output", default=None,
                   help="the file --format parquet writes (default: none)")
    q.add_argument("--json", dest="format", action="store_const", const="json",
                   help="the same as --format json (default: off)")
    _add_scheduler_option(q)
    q.set_defaults(func=commands.sql)
    k = _subparser(sub, "pack", "pack every file's tokens into a Megatron .bin/.idx or Modalities .pbin store")
    _add_corpus_options(k)
    k.add_argument("prefix", help="output prefix: PREFIX.bin/.idx or PREFIX.pbin, plus PREFIX.consumer.json/.npz")
    k.add_argument("--format", default="megatron", choices=["megatron", "modalities"],
                   help="megatron: .bin/.idx readable by Megatron-LM; modalities: .pbin (default: %(default)s)")
    _add_shard_option(k)
    _add_scheduler_option(k)
    k.set_defaults(func=commands.pack)
    m = _subparser(sub, "merge", "join the packed stores (or, with --catalogs, the catalogs) of several shards")
    m.add_argument("out", help="output prefix (stores) or cache directory (--catalogs)")
    m.add_argument("inputs", nargs="+", help="the shards' prefixes, or their cache directories with --catalogs")
    m.add_argument("--catalogs", action="store_true",
                   help="merge the catalogs of these cache directories instead of packed stores (default: off)")
    m.set_defaults(func=commands.merge)
    t = _subparser(sub, "inspect", "counts, dtype, classes and a decoded document of a packed store")
    t.add_argument("prefix", help="the prefix given to 'consumer pack' (PREFIX.bin/.idx or PREFIX.pbin)")
    t.add_argument("--tokens", type=_int_at_least(0), default=64,
                   help="tokens of the first document shown (default: %(default)s)")
    t.add_argument("--json", action="store_true", help="the summary as JSON (default: off)")
    _add_remote_store_options(t)
    t.set_defaults(func=commands.inspect)
    v = _subparser(sub, "verify", "read every token of a packed store: chunk checksums, sha256 and id range")
    v.add_argument("prefix", help="the prefix given to 'consumer pack' (PREFIX.bin/.idx or PREFIX.pbin)")
    v.add_argument("--json", action="store_true", help="the report as JSON (default: off)")
    _add_remote_store_options(v)
    v.set_defaults(func=commands.verify)
    r = _subparser(sub, "report", "write the corpus report of a directory: one self-contained HTML page")
    _add_corpus_options(r)
    report_cmd.add_arguments(r)
    r.set_defaults(func=report_cmd.report)
    c = _subparser(sub, "cache", "list or clear cached indexes")
    c.add_argument("action", choices=["list", "clear"],
                   help="list the cached indexes, or delete every file the library wrote in the cache directory "
                        "(the catalog only with --catalog; other files are left alone)")
    c.add_argument("--cache-dir", default=None,
                   help="the cache directory (default: $CONSUMER_CACHE_DIR, else ~/.cache/consumer)")
    c.add_argument("--catalog", action="store_true",
                   help="clear: also delete the file catalog and its lock file (default: off)")
    c.set_defaults(func=commands.cache)
    return p


def _storage_options(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of fsspec options, got {text!r}")
    return value


def _add_remote_store_options(p: argparse.ArgumentParser) -> None:
    """Options of a store whose prefix is a URL (s3://, https://, ...)."""
    p.add_argument("--storage-options", type=_storage_options, default=None, metavar="JSON",
                   help="fsspec options of a store at a URL, e.g. '{\"endpoint_url\": \"http://host:9000\"}' "
                        "(default: credentials from the environment)")
    p.add_argument("--cache-dir", default=None,
                   help="where the index files of a store at a URL are kept (default: $CONSUMER_CACHE_DIR, else "
                        "~/.cache/consumer)")


def _report_warnings(caught: list[warnings.WarningMessage]) -> None:
    """The library's own warnings as one ``consumer: warning:`` line each; others as Python shows them."""
    for w in caught:
        if issubclass(w.category, ConsumerWarning):
            print(f"consumer: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input, 1 other failure).

    A failure is one line on stderr; the library's warnings are shown (one line each) only when the
    command succeeded, so that an error stays the only thing said.
    """
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConsumerWarning)
        try:
            code = args.func(args)
        except ConsumerError as e:
            print(f"consumer: error: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            print(f"consumer: error: {e}", file=sys.stderr)
            return 1
        except Exception as e:  # noqa: BLE001  (a bug: still one line, with its type, and exit 1)
            print(f"consumer: internal error: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    _report_warnings(caught)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
