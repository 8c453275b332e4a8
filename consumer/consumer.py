"""The ``Consumer`` facade: wires normalise -> headers -> documents -> index -> select -> read -> collate.

It holds no logic of its own beyond validation and bookkeeping; each step lives in its module.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Callable

import numpy as np

from . import __version__
from .cache import cache_key, check_cache_dir, file_table_sha256, load_entry, save_entry
from .catalog import CATALOG_NAME, Catalog, display_path, path_key
from .collate import to_tensors
from .documents import DocumentTable, build_documents
from .errors import InputError, QueryError, SelectionError, short_repr
from .filemeta import HEADER_RULES_VERSION, MAX_HEADER_BYTES, check_metadata, headers_from, libmagic_version
from .index import LONG_FILES, STYLES, SampleIndex, build_index, resolve_seqlen
from .ir import ClassFiles, Corpus, normalise, stat_files
from .megatron_index import MegatronSampling, megatron_sample_index
from .queries import MaskConfig, build_columns, columns_of, mask_rng, needs_masking
from .reader import packed_runs, read_rows, read_segments
from .sampler import EpochBatcher, TokenBudgetBatcher
from .select import resolve, split_key
from .sql import DatasetSQL, Rows
from .vocab import Vocab, decode_ids

__all__ = ["Consumer"]

_SELECT_TAG = 0x73656C65  # "sele": the stream of random draws for {class: n} selections
_DEFAULT = object()  # "use the mode's default query"
_INDEX_ARRAYS = ("seg_ptr", "seg_doc", "seg_start", "seg_len", "seg_col", "sample_class", "class_ptr")


def _view_rows(docs: DocumentTable, index: SampleIndex, classes: list[str], class_to_id: dict[str, int]):
    """A factory of the per-file rows of the SQL view (no reference back to the Consumer)."""
    per_doc_samples = np.bincount(index.seg_doc, minlength=len(docs))

    def rows():
        for i, (c, t, n) in enumerate(zip(docs.doc_class.tolist(), docs.doc_len.tolist(), per_doc_samples.tolist())):
            path = docs.paths[i]
            yield (i, path_key(path), display_path(path), classes[c], class_to_id[classes[c]], docs.header_text(i), t, n)

    return rows


def _check_class_to_id(class_to_id, classes: list[str]) -> dict[str, int]:
    if class_to_id is None:
        return {c: i for i, c in enumerate(classes)}
    if not isinstance(class_to_id, dict):
        raise InputError(f"class_to_id must be a dict {{class: int}}, got {short_repr(class_to_id)}")
    missing = [c for c in classes if c not in class_to_id]
    if missing:
        raise InputError(f"class_to_id misses class(es) {missing}; it has {short_repr(sorted(map(str, class_to_id)))}")
    out: dict[str, int] = {}
    for c, i in class_to_id.items():
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0:
            raise InputError(f"class_to_id[{c!r}] must be an int >= 0, got {short_repr(i)}")
        out[c] = int(i)
    ids = [out[c] for c in classes]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f"class_to_id gives the same id to several classes: duplicate ids {dup}")
    return out


class Consumer:
    """A query engine over the raw bytes of files: ``ds[selection, query]`` -> dict of int64 tensors.

    Args:
        fps: the files: F0 ``[path, ...]``, F1 ``[{path: class}, ...]``, F2 ``{path: class}``,
            F3 ``{class: [path, ...]}`` or a directory whose sub-folders are classes.
        style: ``"diff"`` (one padded sample per file) or ``"concat"`` (per class one stream cut into
            exact windows).
        n_bytes: bytes per token, 1, 2 or 3.
        seqlen: tokens per sample, or ``"auto"`` for the longest document in tokens.
        metadata: file-type header: ``"file"`` (libmagic description), ``"mime"``, ``None`` or a
            callable ``path -> str``.
        class_to_id: ``{class: id}``; default: sorted class names get 0..C-1.
        seed: seed of every random choice (I4 draws, batch shuffles, masks).
        cache_dir: where the catalog and the index cache live: a directory, ``None`` for the default
            (``$CONSUMER_CACHE_DIR`` or ``~/.cache/consumer``) or ``False`` to keep everything in memory.
        verbose: show a progress bar while libmagic runs; otherwise nothing is printed.
        long_files: diff style only: ``"truncate"`` long files to ``seqlen`` or serve them as
            consecutive ``"windows"`` so no byte is unreachable.
        sampling: ``"consumer"`` (the styles above) or, with ``style="concat"`` and an int ``seqlen``,
            ``"megatron"`` / ``MegatronSampling(num_samples, add_extra_token)``: Megatron-LM's GPT
            sample order over all documents (sample ``k`` is Megatron's item ``k``).
    """

    def __init__(self, fps: Any, *, style: str = "diff", n_bytes: int = 2, seqlen: int | str = "auto",
                 metadata: str | None | Callable[[str], str] = "file", class_to_id: dict | None = None,
                 seed: int = 4, cache_dir=None, verbose: bool = False, long_files: str = "truncate",
                 sampling: str | MegatronSampling = "consumer"):
        t0 = time.perf_counter()
        check_metadata(metadata)
        self._cache_root = check_cache_dir(cache_dir)
        self._configure(style=style, seqlen=seqlen, seed=seed, verbose=verbose, long_files=long_files,
                        sampling=sampling)
        vocab = Vocab(n_bytes)
        corpus = normalise(fps)
        paths, cls = corpus.flat()
        cls = np.asarray(cls, dtype=np.int64)
        sizes, self._mtimes = stat_files(paths)
        class_to_id = _check_class_to_id(class_to_id, corpus.class_names)
        spec = None if callable(metadata) else {
            "style": style, "n_bytes": vocab.n_bytes, "seqlen": self._seqlen_requested, "long_files": long_files,
            "sampling": self._sampling_dict(), "seed": self.seed if self._megatron else None,
            "metadata": metadata, "max_header_bytes": MAX_HEADER_BYTES, "header_rules": HEADER_RULES_VERSION,
            "consumer_version": __version__,
            "class_to_id": {c: class_to_id[c] for c in corpus.class_names},
            "classes": corpus.class_names, "libmagic": libmagic_version() if metadata else None,
            "files_sha256": file_table_sha256(paths, cls, sizes, self._mtimes)}
        key = cache_key(spec) if spec is not None and self._cache_root else None
        entry = load_entry(self._cache_root, key) if key else None
        self._catalog = None
        self._sql = None
        if entry is not None:
            arrays, desc = entry
            documents = DocumentTable(
                vocab=vocab, paths=paths, doc_class=arrays["doc_class"], doc_size=arrays["doc_size"],
                doc_header=arrays["doc_header"], headers=desc["headers"], header_ptr=arrays["header_ptr"],
                header_tok=arrays["header_tok"], with_header=metadata is not None)
            index = SampleIndex(seqlen=int(desc["seqlen"]), **{k: arrays[k] for k in _INDEX_ARRAYS})
            self._finish(corpus, documents, metadata, class_to_id, index=index)
            magic_calls = 0
        else:
            want = {"file": ("description",), "mime": ("mime",)}.get(metadata, ()) if isinstance(metadata, str) else ()
            desc_, mime = self.catalog.sync(paths, sizes, self._mtimes, want=want, verbose=verbose)
            headers = headers_from(metadata, paths, desc_, mime)
            documents = build_documents(paths, cls, sizes, headers, vocab, with_header=metadata is not None)
            self._finish(corpus, documents, metadata, class_to_id)
            magic_calls = self.catalog.magic_calls
            if key:
                self._save_cache(key, spec)
        self.build_info = {"cache": "off" if key is None else ("hit" if entry is not None else "miss"),
                           "key": key, "libmagic_calls": magic_calls, "seconds": time.perf_counter() - t0}

    def _save_cache(self, key: str, spec: dict) -> None:
        d, i = self.documents, self.index
        arrays = {"doc_class": d.doc_class, "doc_size": d.doc_size, "doc_header": d.doc_header,
                  "header_ptr": d.header_ptr, "header_tok": d.header_tok,
                  **{k: getattr(i, k) for k in _INDEX_ARRAYS}}
        save_entry(self._cache_root, key, arrays, {"spec": spec, "seqlen": self.seqlen, "headers": d.headers,
                                                    "files": len(d), "samples": len(i)})

    @property
    def catalog(self) -> Catalog:
        """The file catalog (SQLite under ``cache_dir``, or in memory with ``cache_dir=False``)."""
        if self._catalog is None:
            path = os.path.join(self._cache_root, CATALOG_NAME) if self._cache_root else None
            self._catalog = Catalog(path)
        return self._catalog

    # ----------------------------------------------------------------- SQL
    def sql(self, statement: str, params=()) -> Rows:
        """Run one read-only SQL statement over the view ``files`` (one row per file of this dataset:
        ``file_id, path, class, class_id, size, mtime_ns, extension, description, mime, header, sha256,
        tokens, samples``). Returns rows (tuples) with ``.columns``. Writes, ATTACH and PRAGMA are
        refused with :class:`QueryError`. The first call runs libmagic on files that never had it (a
        packed dataset never touches its source files: description/MIME come from its headers)."""
        if self._sql is None:
            docs = self.documents
            if docs.packed is not None:
                self._catalog = Catalog(None)
                headers = [docs.header_text(i) for i in range(len(docs))]
                self._catalog.insert(docs.paths, docs.doc_size, self._mtimes,
                                     headers if self.metadata == "file" else None,
                                     headers if self.metadata == "mime" else None)
            else:
                self.catalog.sync(docs.paths, docs.doc_size, self._mtimes, want=("description", "mime"))
            self._sql = DatasetSQL(self.catalog.path, None if self.catalog.path else self.catalog.connection,
                                   _view_rows(docs, self.index, self.classes, self.class_to_id))
        return self._sql.query(statement, params)

    def where(self, condition: str, params=()) -> "Consumer":
        """A new ``Consumer`` over the files matching an SQL condition on the ``files`` view (see
        :meth:`sql`), with the same settings, ``class_to_id`` and resolved ``seqlen``, the same tokens
        (nothing is re-read or re-described) and its own sample index:
        ``ds.where("mime LIKE 'image/%' AND size < 1000000")[{"cat": 10}, "supervised"]``."""
        if not isinstance(condition, str) or not condition.strip():
            raise QueryError(f"condition must be a non-empty SQL expression, got {short_repr(condition)}")
        rows = self.sql(f"SELECT file_id FROM files WHERE ({condition}) ORDER BY file_id", params)
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        if not ids.size:
            raise SelectionError(f"where({condition!r}) matched no file")
        if ids.min() < 0 or ids.max() >= len(self.documents) or np.any(np.diff(ids) <= 0):
            raise QueryError(f"where({condition!r}) did not select file_id values of this dataset")
        return self._subset(ids)

    def _subset(self, file_ids: np.ndarray) -> "Consumer":
        """A dataset over some of this one's files (sorted ids): same settings and tokens, own index."""
        t0 = time.perf_counter()
        docs = self.documents
        kept = np.unique(docs.doc_class[file_ids])
        new_class = np.full(len(self.classes), -1, dtype=np.int64)
        new_class[kept] = np.arange(kept.size)
        sub = self.__class__.__new__(self.__class__)
        sub._configure(style=self.style, seqlen=self._seqlen_requested if self._megatron else self.seqlen,
                       seed=self.seed, verbose=self.verbose, long_files=self.long_files, sampling=self.sampling)
        sub._cache_root, sub._catalog, sub._sql = self._cache_root, self._catalog, None
        sub._mtimes = self._mtimes[file_ids]
        paths = [docs.paths[i] for i in file_ids.tolist()]
        corpus = Corpus(classes=tuple(
            ClassFiles(name=self.classes[c], paths=tuple(p for p, k in zip(paths, docs.doc_class[file_ids].tolist())
                                                        if k == c)) for c in kept.tolist()), form=self.corpus.form)
        sub._finish(corpus, docs.subset(file_ids, new_class), self.metadata, self.class_to_id)
        sub.build_info = {"cache": "subset", "key": None, "libmagic_calls": 0, "seconds": time.perf_counter() - t0}
        return sub

    def close(self) -> None:
        """Close the SQL and catalog connections (also done by ``with Consumer(...) as ds:``)."""
        if self._sql is not None:
            self._sql.close()
            self._sql = None
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @classmethod
    def from_packed(cls, prefix, *, style: str = "diff", seqlen: int | str = "auto", class_to_id: dict | None = None,
                    seed: int = 4, long_files: str = "truncate",
                    sampling: str | MegatronSampling = "consumer") -> "Consumer":
        """Open a store written by :meth:`pack` (or merged packs): same tokens, bit for bit, as the
        raw files gave, read from memory-mapped token arrays. ``n_bytes`` and the header mode come
        from the store, and so does ``class_to_id`` unless given; ``style``, ``seqlen``, ``sampling`` and
        the rest may differ from the packing run."""
        from .packed import open_packed, read_sidecar  # noqa: PLC0415  (formats load only when used)

        t0 = time.perf_counter()
        self = cls.__new__(cls)
        self._configure(style=style, seqlen=seqlen, seed=seed, verbose=False, long_files=long_files,
                        sampling=sampling)
        self._cache_root, self._catalog, self._sql = None, None, None
        corpus, documents, metadata = open_packed(prefix)
        if class_to_id is None:
            class_to_id = read_sidecar(prefix)["class_to_id"]
        self._mtimes = np.zeros(len(documents), dtype=np.int64)
        self._finish(corpus, documents, metadata, class_to_id)
        self.build_info = {"cache": "packed", "key": None, "libmagic_calls": 0, "seconds": time.perf_counter() - t0}
        return self

    def pack(self, prefix, format: str = "megatron", *, verbose: bool | None = None) -> dict:
        """Write every file's document tokens to a packed store at ``prefix`` (``"megatron"``: ``.bin`` /
        ``.idx`` readable by Megatron-LM; ``"modalities"``: ``.pbin``), plus a sidecar with
        classes and the file table. Atomic: a killed pack leaves nothing that looks complete. Returns a
        summary (paths written, documents, tokens, bytes)."""
        from .packed import pack  # noqa: PLC0415

        return pack(self, prefix, format=format, verbose=self.verbose if verbose is None else verbose)

    def _configure(self, *, style, seqlen, seed, verbose, long_files, sampling) -> None:
        if style not in STYLES:
            raise InputError(f"style must be one of {sorted(STYLES)}, got {short_repr(style)}")
        if long_files not in LONG_FILES:
            raise InputError(f"long_files must be one of {LONG_FILES}, got {short_repr(long_files)}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(f"seed must be an int >= 0, got {short_repr(seed)}")
        if not isinstance(verbose, bool):
            raise InputError(f"verbose must be a bool, got {short_repr(verbose)}")
        if isinstance(seqlen, str) and seqlen != "auto":
            raise InputError(f"seqlen must be a positive int or 'auto', got {short_repr(seqlen)}")
        if sampling == "megatron":
            sampling = MegatronSampling()
        if sampling != "consumer" and not isinstance(sampling, MegatronSampling):
            raise InputError(f"sampling must be 'consumer', 'megatron' or a MegatronSampling, got {short_repr(sampling)}")
        if isinstance(sampling, MegatronSampling) and (style != "concat" or isinstance(seqlen, str)):
            raise InputError(f"sampling='megatron' needs style='concat' and an int seqlen (Megatron's seq_length), "
                             f"got style={style!r}, seqlen={seqlen!r}")
        self.style, self.seed, self.verbose, self.long_files = style, int(seed), verbose, long_files
        self._seqlen_requested = seqlen if isinstance(seqlen, str) else resolve_seqlen(seqlen, None)
        self.sampling = sampling
        self._megatron = isinstance(sampling, MegatronSampling)

    def _sampling_dict(self) -> dict | str:
        return self.sampling.to_dict() if self._megatron else self.sampling

    def _finish(self, corpus: Corpus, documents: DocumentTable, metadata, class_to_id,
                index: SampleIndex | None = None) -> None:
        self.corpus = corpus
        self.documents = documents
        self.vocab: Vocab = documents.vocab
        self.metadata = metadata
        self.classes: list[str] = corpus.class_names
        self.class_to_id: dict[str, int] = _check_class_to_id(class_to_id, self.classes)
        self.id_to_class: dict[int, str] = {self.class_to_id[c]: c for c in self.classes}
        if index is None and self._megatron:
            index = megatron_sample_index(documents.doc_len, documents.doc_class, len(self.classes),
                                          seq_length=self._seqlen_requested, seed=self.seed,
                                          num_samples=self.sampling.num_samples,
                                          add_extra_token=self.sampling.add_extra_token)
        elif index is None:
            seqlen = resolve_seqlen(self._seqlen_requested, documents.doc_len)
            index = build_index(self.style, documents.doc_len, documents.doc_class, len(self.classes), seqlen,
                                long_files=self.long_files)
        self.index: SampleIndex = index
        self.seqlen: int = index.seqlen
        self._class_ids = np.array([self.class_to_id[c] for c in self.classes], dtype=np.int64)
        self._select_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, _SELECT_TAG])))
        self._mask_cfg = MaskConfig()
        self._default_query: str | None = None
        self._batcher: EpochBatcher | None = None
        self._runs = None  # packed stores: per-sample contiguous ranges, computed on first fetch

    # ----------------------------------------------------------------- sizes and names
    def __len__(self) -> int:
        return len(self.index)

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)

    @property
    def files(self) -> list[str]:
        """Absolute paths of every file, in corpus order (``file_id`` indexes this list)."""
        return self.documents.paths

    def samples_per_class(self) -> dict[str, int]:
        """Number of samples of each class."""
        return dict(zip(self.classes, self.index.samples_per_class().tolist()))

    # ----------------------------------------------------------------- modes
    def set_supervised_mode(self) -> None:
        """Make ``"supervised"`` the default query of bare selections and ``get_next_batch()``."""
        self._default_query = "supervised"

    def set_unsupervised_mode(self, mask_frequency: float = 0.15, add_cls: bool = False,
                              mask_rule: str = "bert") -> None:
        """Set masking (fraction, ``"bert"`` 80/10/10 or ``"mask"`` rule, CLS prefix) and make
        ``"unsupervised"`` the default query. Explicit queries keep working whatever the mode."""
        self._mask_cfg = MaskConfig(frequency=mask_frequency, rule=mask_rule, add_cls=add_cls)
        self._default_query = "unsupervised"

    def set_mlm_mode(self, mask_frequency: float = 0.15, add_cls: bool = False, mask_rule: str = "bert") -> None:
        """Like :meth:`set_unsupervised_mode`, with ``"mlm"`` (input, attention mask, labels) as default."""
        self.set_unsupervised_mode(mask_frequency, add_cls, mask_rule)
        self._default_query = "mlm"

    # ----------------------------------------------------------------- fetching
    def __getitem__(self, key) -> dict:
        selection, query, given = split_key(key)
        if not given:
            query = self._default_query
        width = None
        if selection is None:
            ids, epoch = self._next_ids()
            if isinstance(self._batcher, TokenBudgetBatcher):
                width = int(self.index.sample_tokens()[ids].max()) if ids.size else 0
        else:
            ids, epoch = resolve(selection, len(self), self.index.class_ptr, self.classes, self._select_rng), 0
        return to_tensors(self.fetch_numpy(ids, query, epoch=epoch, width=width))

    def fetch(self, sample_ids, query=None, *, epoch: int = 0) -> dict:
        """The batch of the given sample ids with the columns of ``query``, as int64 CPU tensors.

        ``epoch`` only changes the masks (dynamic masking per epoch).
        """
        ids = np.asarray(sample_ids, dtype=np.int64).reshape(-1)
        return to_tensors(self.fetch_numpy(ids, query, epoch=epoch))

    def fetch_numpy(self, sample_ids: np.ndarray, query=None, *, epoch: int = 0,
                    width: int | None = None) -> dict[str, np.ndarray]:
        """Same as :meth:`fetch` but numpy arrays (no torch needed). ``width`` (>= the longest selected
        sample) narrows the rows from ``seqlen``; token-budget batches use it."""
        cols = columns_of(query)
        if sample_ids.size and (sample_ids.min() < 0 or sample_ids.max() >= len(self)):
            raise InputError(f"sample_ids must be in [0, {len(self)}), got {short_repr(sample_ids.tolist())}")
        if width is not None and sample_ids.size and int(self.index.sample_tokens()[sample_ids].max()) > width:
            raise InputError(f"width={width} is narrower than the longest selected sample "
                             f"({int(self.index.sample_tokens()[sample_ids].max())} tokens)")
        masking = needs_masking(cols)
        if self.documents.packed is not None and self._runs is None:
            self._runs = packed_runs(self.index, self.documents)
        tokens, content = read_rows(self.index, self.documents, sample_ids, content_mask=masking, runs=self._runs,
                                    width=width)
        first_seg = self.index.seg_ptr[sample_ids]
        return build_columns(
            cols, tokens, content, vocab=self.vocab, cfg=self._mask_cfg,
            rng_factory=lambda: mask_rng(self.seed, epoch, sample_ids), sample_ids=sample_ids,
            sample_class_ids=self._class_ids[self.index.sample_class[sample_ids]],
            file_id=self.index.seg_doc[first_seg], offset=self.index.seg_start[first_seg])

    # ----------------------------------------------------------------- batches
    def create_batches(self, batch_size: int, drop_last: bool = False, seed: int = 4, shuffle: bool = True) -> None:
        """Cut the samples into batches for ``ds[None]`` / :meth:`get_next_batch`.

        Epoch ``e`` uses the permutation of ``(seed, e)`` (``shuffle=False``: sample order, e.g. to
        follow Megatron's order with ``sampling="megatron"``); after the last batch of an epoch the
        next call continues with epoch ``e + 1``. No global RNG is touched.
        """
        self._batcher = EpochBatcher(len(self), batch_size, drop_last, seed, shuffle=shuffle)

    def create_token_batches(self, max_tokens: int, max_sentences: int | None = None,
                             required_batch_size_multiple: int = 1, seed: int = 4, shuffle: bool = True) -> None:
        """Batches under a token budget, fairseq's ``batch_by_size``: samples sorted by length are cut
        so that ``batch size x longest sample <= max_tokens`` (and ``<= max_sentences`` samples,
        rounded down to ``required_batch_size_multiple``). ``ds[None]`` / :meth:`get_next_batch` then
        return rows only as wide as the batch's longest sample, so little padding is wasted (best
        with ``style="diff"``, whose samples vary in length). Batch order is shuffled per epoch."""
        lengths = self.index.sample_tokens() + int(self._mask_cfg.add_cls)  # a CLS column counts too
        self._batcher = TokenBudgetBatcher(lengths, max_tokens, max_sentences, required_batch_size_multiple,
                                           seed, shuffle)

    def get_next_batch(self, query=_DEFAULT) -> dict:
        """The next batch (see :meth:`create_batches`); ``query`` defaults to the mode's query."""
        return self[None, self._default_query if query is _DEFAULT else query]

    def _next_ids(self) -> tuple[np.ndarray, int]:
        if self._batcher is None:
            self.create_batches(1, seed=self.seed)  # gperc's I0 served one sample at a time
        return self._batcher.next()

    def state_dict(self) -> dict:
        """JSON-able position of the batch iterator (epoch, batches served), for exact resumption."""
        if self._batcher is None:
            raise InputError("state_dict: no batches yet, call create_batches(batch_size) first")
        return self._batcher.state_dict()

    def load_state_dict(self, state: dict) -> None:
        """Continue the batch iterator from a :meth:`state_dict` taken on an identical dataset."""
        if isinstance(state, dict) and state.get("kind") == TokenBudgetBatcher.kind:
            batcher = TokenBudgetBatcher.from_state_dict(state, self.index.sample_tokens())
        else:
            batcher = EpochBatcher.from_state_dict(state)
        if batcher.n_samples != len(self):
            raise InputError(f"state['n_samples']={batcher.n_samples} does not match this dataset ({len(self)})")
        self._batcher = batcher

    # ----------------------------------------------------------------- decoding
    def decode(self, ids, *, specials: str = "skip") -> bytes:
        """Bytes of a token sequence (one row): specials skipped or rendered as ``<EOF>``-style tags."""
        return decode_ids(ids, self.vocab, specials=specials)

    def document_tokens(self, file_id: int) -> np.ndarray:
        """The whole token stream of one file: header, SEP, content, EOF (reads the file)."""
        if isinstance(file_id, bool) or not isinstance(file_id, (int, np.integer)) \
                or not 0 <= file_id < len(self.documents):
            raise InputError(f"file_id must be an int in [0, {len(self.documents)}), got {short_repr(file_id)}")
        n = int(self.documents.doc_len[file_id])
        zero = np.zeros(1, dtype=np.int64)
        return read_segments(self.documents, (1, n), zero, zero, np.array([file_id]), zero, np.array([n]))[0][0]

    # ----------------------------------------------------------------- export
    def get_dict(self, include_files: bool = False) -> dict:
        """Everything needed to reproduce this dataset: settings, classes, counts, vocab, versions.

        With ``include_files`` the full file list (path, size, class) is included too; otherwise a
        sha256 fingerprint of it.
        """
        docs = self.documents
        n_classes = self.n_classes
        files = np.bincount(docs.doc_class, minlength=n_classes)
        bytes_ = np.bincount(docs.doc_class, weights=docs.doc_size, minlength=n_classes).astype(np.int64)
        tokens = np.bincount(docs.doc_class, weights=docs.doc_len, minlength=n_classes).astype(np.int64)
        samples = self.index.samples_per_class()
        listing = [[p, int(s), self.classes[int(c)]] for p, s, c in zip(docs.paths, docs.doc_size, docs.doc_class)]
        out = {
            "consumer_version": __version__,
            "data_mode": self.corpus.form,
            "style": self.style,
            "n_bytes": self.vocab.n_bytes,
            "seqlen": self.seqlen,
            "seqlen_requested": self._seqlen_requested,
            "long_files": self.long_files,
            "sampling": self._sampling_dict(),
            "metadata": self.metadata if (self.metadata is None or isinstance(self.metadata, str)) else "callable",
            "max_header_bytes": MAX_HEADER_BYTES,
            "seed": self.seed,
            "mode": self._default_query,
            "mask": {"frequency": self._mask_cfg.frequency, "rule": self._mask_cfg.rule,
                     "add_cls": self._mask_cfg.add_cls},
            "n_classes": n_classes,
            "classes": self.classes,
            "class_to_id": self.class_to_id,
            "per_class": {c: {"files": int(files[i]), "bytes": int(bytes_[i]), "tokens": int(tokens[i]),
                              "samples": int(samples[i])} for i, c in enumerate(self.classes)},
            "total_files": len(docs),
            "total_samples": len(self),
            "vocab": self.vocab.to_dict(),
            "vocab_size": self.vocab.size,
            "libmagic_version": libmagic_version(),
            "files_sha256": hashlib.sha256(json.dumps(listing).encode()).hexdigest(),
        }
        if self._batcher is not None:
            out["batches"] = {k: v for k, v in self._batcher.state_dict().items()
                              if k not in ("version", "epoch", "position")}
        if include_files:
            out["files"] = listing
        return out

    def to_json(self, fp=None, include_files: bool = False) -> str | None:
        """:meth:`get_dict` as indented JSON; written to ``fp`` (a path) and ``None`` returned if given."""
        text = json.dumps(self.get_dict(include_files=include_files), indent=2)
        if fp is None:
            return text
        with open(fp, "w", encoding="utf-8") as f:
            f.write(text)
        return None

    def __repr__(self) -> str:
        return (f"Consumer(style={self.style!r}, n_bytes={self.vocab.n_bytes}, seqlen={self.seqlen}, "
                f"classes={self.n_classes}, files={len(self.documents)}, samples={len(self)})")
