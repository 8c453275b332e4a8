"""The ``Consumer`` facade over a built dataset: every constructor goes through :mod:`consumer.dataset.build` and
``_attach``; every method is a short call into the module that does the job (``fetch/``, ``query/``,
``training/``, ``dataset/export``, ``packed/``, ``scale/``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dataset.build import Built, build, build_packed, build_subset, restore
from .dataset.described import build_from_dict
from .dataset.display import repr_html, text_repr
from .dataset.export import dataset_dict, dump_json
from .fetch.collate import to_tensors
from .fetch.columns import MaskConfig
from .fetch.fetcher import Fetcher
from .fetch.modes import ModeMethods
from .fetch.select import as_sample_ids, resolve, split_key
from .query.face import SQLMethods
from .query.session import SQLSession
from .sources.records.options import RecordOptions, default_metadata
from .spec import Metadata, Spec, metadata_name
from .storage import Storage
from .tokens.index import PaddingNotice
from .tokens.split import split_file_ids
from .tokens.vocab import decode_ids
from .training.sampler import BatchCursor, CursorMethods
from .util.seeds import generator
from .util.validate import check_bool

__all__ = ["Consumer"]
_DEFAULT = object()  # "use the mode's default query"


class Consumer(SQLMethods, ModeMethods, CursorMethods):
    """A query engine over the raw bytes of files: ``ds[selection, query]`` -> dict of int64 tensors.

    ``fps``: F0 ``[path]``, F1 ``[{path: class}]``, F2 ``{path: class}``, F3 ``{class: [path]}`` or a directory of
    class folders. ``style`` ``"diff"`` (a padded sample per file), ``"concat"`` (per class a stream cut into windows)
    or ``"packed"`` (whole files in rows); ``n_bytes`` 1-3; ``seqlen`` an int, ``"auto"``, ``"auto:pNN"``; ``metadata``:
    ``"file"``, ``"mime"``, ``None`` or ``path -> str``; ``class_to_id`` (default: sorted names get 0..C-1);
    ``seed`` of every random choice; ``cache_dir`` a directory, ``None`` (default place) or ``False`` (memory);
    ``verbose`` progress bars; ``long_files`` ``"truncate"``/``"windows"``; ``sampling`` ``"consumer"`` or
    ``"megatron"`` (Megatron-LM's GPT order); ``dedupe="content"`` drops later copies of equal files; URLs
    (``s3://``, ``https://``) take fsspec ``storage_options`` and an optional ``remote_cache="20GB"``; under an
    initialised ``torch.distributed`` rank 0 alone builds and the others open its cache (``distributed=False``: each);
    ``engine`` (a ``dask.distributed.Client`` or ``"dask"``) runs stat, libmagic and content on a cluster;
    ``on_bad_file="skip"`` leaves a directory's broken symlinks, loops, special and unreadable files out.
    ``documents``: ``"files"`` or records inside containers (``"lines"``, ``"jsonl"``, ``"parquet"``, ``"tar"``;
    ``text_field``, ``class_field``, ``on_bad_record``; docs/records.md); ``metadata`` then defaults to None but tar.
    Attributes: ``spec`` (and its settings), ``classes``, ``n_classes``, ``class_to_id``, ``id_to_class``, ``vocab``,
    ``seqlen``, ``files``, ``corpus``, ``documents``, ``index``, ``build_info``, ``mode``. The SQL methods (``sql``,
    ``to_arrow``, ``export_catalog``, ``duplicates``, ``catalog``, ``files_table``) are :class:`SQLMethods`', the
    ``set_*_mode`` setters :class:`ModeMethods`'.
    """

    def __init__(self, fps: Any, *, style: str = "diff", n_bytes: int = 2, seqlen: int | str = "auto",
                 metadata: Any = _DEFAULT, class_to_id: dict | None = None, seed: int = 4, cache_dir: Any = None,
                 verbose: bool = False, long_files: str | None = None, sampling: Any = "consumer",
                 dedupe: str | None = None, storage_options: dict | None = None, remote_cache: Any = None,
                 distributed: bool = True, engine: Any = None, documents: str = "files", text_field: str = "text",
                 class_field: str | None = None, on_bad_record: str = "raise",
                 on_bad_file: str = "raise"):
        records = RecordOptions(documents, text_field, class_field, on_bad_record)
        spec = Spec(style=style, n_bytes=n_bytes, seqlen=seqlen, metadata=default_metadata(records, metadata),
                    long_files=long_files, sampling=sampling, class_to_id=class_to_id, seed=seed, dedupe=dedupe,
                    records=records)
        storage = Storage.of(storage_options, cache_dir, remote_cache)
        self._attach(build(fps, spec, storage, verbose=check_bool("verbose", verbose), distributed=distributed,
                           engine=engine, on_bad_file=on_bad_file),
                     verbose)

    @classmethod
    def _from_built(cls, built: Built, verbose: bool = False) -> Consumer:
        self = cls.__new__(cls)
        self._attach(built, verbose)
        return self

    def _attach(self, built: Built, verbose: bool) -> None:
        """The one place a dataset's state is set (every constructor ends here)."""
        s = self.spec = built.spec
        self._built, self.verbose, self.build_info = built, verbose, built.info
        self.corpus, self.documents, self.index = built.corpus, built.documents, built.index
        self.style, self.seed, self.long_files, self.sampling, self.metadata = (
            s.style, s.seed, s.long_files, s.sampling, s.metadata)
        self.vocab, self.seqlen, self.classes = s.vocab, built.index.seqlen, built.corpus.class_names
        self.n_classes, self.files = len(self.classes), built.documents.paths
        self.class_to_id = dict(s.class_to_id or {})
        self.id_to_class: dict[int, str] = {self.class_to_id[c]: c for c in self.classes}
        class_ids = np.array([self.class_to_id[c] for c in self.classes], dtype=np.int64)
        self._fetcher = Fetcher(built.documents, built.index, class_ids, s.seed, crop=s.crops, sampling=s.sampling)
        self._session = SQLSession(built.documents, built.index, self.classes, self.class_to_id,
                                   metadata_name(s.metadata), built.cache_root, built.catalog, verbose)
        self._select_rng, self._mask, self.mode = generator(s.seed, "select"), MaskConfig(), None
        self._padding = PaddingNotice(s.seqlen, s.style, built.index, enabled=built.info.get("cache") != "subset")
        self._cursor = BatchCursor(built.index.sample_class, self.classes, built.index.sample_tokens(), s.seed,
                                   lambda: dataset_dict(built, mode=None, mask=MaskConfig(), batches=None))

    @classmethod
    def from_packed(cls, prefix: Any, *, style: str = "diff", seqlen: int | str = "auto",
                    class_to_id: dict | None = None, seed: int = 4, long_files: str | None = None,
                    sampling: Any = "consumer", verify: bool = False, vocab_size: int | None = None, **remote: Any
                    ) -> Consumer:
        """A store :meth:`pack` or Megatron/fairseq/Modalities wrote (then sequences are documents, ids a vocabulary of
        ``vocab_size``, None: the dtype's), mapped; ``verify`` reads it all first; storage options: docs/remote.md."""
        spec = Spec(style=style, seqlen=seqlen, long_files=long_files, seed=seed, sampling=sampling,
                    class_to_id=class_to_id, vocab_size=vocab_size)
        return cls._from_built(build_packed(prefix, spec, Storage.from_kwargs(remote, "from_packed"),
                                            check_bool("verify", verify)))

    @classmethod
    def from_dict(cls, d: Any, *, cache_dir: Any = None, verbose: bool = False,
                  metadata: Metadata | None = None) -> Consumer:
        """Rebuild the dataset a ``get_dict(include_files=True)`` (or its ``to_json`` text or file) describes."""
        return cls._from_built(build_from_dict(d, cache_dir=cache_dir, verbose=verbose, metadata=metadata), verbose)
    from_json = from_dict

    def subset(self, file_ids: Any) -> Consumer:
        """A dataset over some of this one's files (``file_id`` values): same settings, tokens and row width."""
        return self._from_built(build_subset(self._built, file_ids, self._session.open_catalog), self.verbose)

    def split(self, fractions: dict, *, seed: int | None = None) -> dict[str, Consumer]:
        """Disjoint datasets by file, stratified per class, stable: ``ds.split({"train": 0.9, "val": 0.1})``."""
        ids = split_file_ids(self.files, self.documents.doc_class, fractions, self.seed if seed is None else seed)
        return {name: self.subset(part) for name, part in ids.items()}

    def where(self, condition: Any, params: Any = ()) -> Consumer:
        """A new dataset over the files matching an SQL condition on the ``files`` view (see :meth:`sql`), or over
        the files of a list (an Arrow table / dataframe / Parquet file with ``file_id`` or ``path``, or paths)."""
        if not isinstance(condition, str):
            return self.subset(self._session.file_ids_of(condition))
        return self.subset(self._session.file_ids_where(condition, params))

    @classmethod
    def from_catalog(cls, files: Any, **options: Any) -> Consumer:
        """A dataset over a file list (an Arrow table, dataframe or Parquet file with ``path`` and, optionally,
        ``class`` columns, e.g. ``export_catalog`` output filtered elsewhere), or a list of paths."""
        from .query.export import file_list_fps  # noqa: PLC0415
        return cls(file_list_fps(files), **options)

    def __len__(self) -> int:
        return len(self.index)

    def samples_per_class(self) -> dict[str, int]:
        """Number of samples of each class."""
        return dict(zip(self.classes, self.index.samples_per_class().tolist()))

    def __getitem__(self, key: Any) -> dict:
        if not self._padding.pending and (one := self._fetcher.one_row.row(key, self.mode, self._mask)):
            return one  # one plain row of a warm store (fetch/one_row.py): the general path's result, sooner
        selection, query, given = split_key(key)
        query = query if given else self.mode
        if selection is not None:
            return to_tensors(self.fetch_numpy(resolve(selection, len(self), self.index.class_ptr, self.classes,
                                                       self._select_rng), query))
        ids, epoch, width = self._cursor.next()
        return to_tensors(self.fetch_numpy(ids, query, epoch=epoch, width=width))

    def fetch(self, sample_ids: Any, query: Any = None, *, epoch: int = 0, out_dtype: Any = np.int64) -> dict:
        """The columns of ``query`` for these sample ids, as tensors (``epoch`` varies the masks)."""
        if not self._padding.pending and (one := self._fetcher.one_row.row(sample_ids, query, self._mask, out_dtype)):
            return one  # one plain row of a warm store (fetch/one_row.py)
        ids = as_sample_ids(sample_ids, len(self))
        return to_tensors(self.fetch_numpy(ids, query, epoch=epoch, out_dtype=out_dtype))

    def fetch_numpy(self, sample_ids: np.ndarray, query: Any = None, *, epoch: int = 0, width: int | None = None,
                    out_dtype: Any = np.int64, into: Any = None) -> dict[str, np.ndarray]:
        """:meth:`fetch` as numpy (``width`` narrows rows, ``out_dtype``, ``into``: see ``Fetcher.fetch``)."""
        if type(sample_ids) is np.ndarray and sample_ids.size == 1 and width is None and not self._padding.pending \
                and (one := self._fetcher.one_row.row(sample_ids, query, self._mask, out_dtype, False)):
            return one  # one plain row of a warm store (fetch/one_row.py), as numpy
        self._padding.once()  # rows are made here: the padding warning, if any, is said now (once)
        return self._fetcher.fetch(sample_ids, query, mask=self._mask, epoch=epoch, width=width, out_dtype=out_dtype,
                                   into=into)

    def document_tokens(self, file_id: int) -> np.ndarray:
        """The whole token stream of one file: header, SEP, content, EOF."""
        return self._fetcher.document_tokens(file_id)

    def decode(self, ids: Any, *, specials: str = "skip") -> bytes:
        """Bytes of a token sequence (one row): specials skipped or rendered as ``<EOF>``-style tags."""
        return decode_ids(ids, self.vocab, specials=specials)

    def create_batches(self, batch_size: int | None, drop_last: bool = False, seed: int | None = None,
                       shuffle: bool = True, **plan: Any) -> None:
        """``ds[None]``/:meth:`get_next_batch` batches in :meth:`dataloader`'s order (``plan``: its keyword options)."""
        self._cursor.epochs(batch_size, drop_last, seed, shuffle, int(self._mask.add_cls), **plan)

    def create_token_batches(self, max_tokens: int, max_sentences: int | None = None, required_batch_size_multiple:
                             int = 1, seed: int | None = None, shuffle: bool = True) -> None:
        """fairseq's token-budget batches (``B x longest sample <= max_tokens``); rows as wide as each batch needs."""
        self.create_batches(max_sentences, seed=seed, shuffle=shuffle, max_tokens=max_tokens,
                            required_batch_size_multiple=required_batch_size_multiple)

    def dataloader(self, batch_size: int | None, **options: Any) -> Any:
        """A resumable torch DataLoader over this dataset (workers, class balance, ranks): see ``make_loader``."""
        from .training.loader import make_loader  # noqa: PLC0415  (torch loads only when a loader is made)
        return make_loader(self, batch_size, **options)

    def report(self, path: Any, **options: Any) -> str:
        """Write the corpus report (one self-contained HTML page; ``content=``, ``types=``: docs/report.md)."""
        from .report import write_report  # noqa: PLC0415
        return write_report(self, path, **options)

    def get_dict(self, include_files: bool = False) -> dict:
        """Settings, classes, counts, vocab, versions and the file list (``include_files``) or its sha256."""
        return dataset_dict(self._built, mode=self.mode, mask=self._mask, include_files=include_files,
                            batches=None if self._cursor.plan is None else self._cursor.state_dict())

    def to_json(self, fp: Any = None, include_files: bool = False) -> str | None:
        """:meth:`get_dict` as indented JSON; written to ``fp`` (a path) and ``None`` returned if given."""
        return dump_json(self.get_dict(include_files=include_files), fp)

    def pack(self, prefix: Any, format: str = "megatron", *, verbose: bool | None = None, engine: Any = None,
             **options: Any) -> dict:
        """Write every document to a packed store (``"megatron"`` ``.bin/.idx`` or ``"modalities"`` ``.pbin``);
        ``engine`` (a ``dask.distributed.Client`` or ``"dask"``) reads the files on a cluster (the same bytes)."""
        from .scale.pack import pack_dataset  # noqa: PLC0415  (the store modules load only when used)
        return pack_dataset(self.documents, self.classes, self.spec, prefix, format,
                            self.verbose if verbose is None else verbose, engine, index=self.index, **options)

    def __getstate__(self) -> dict:  # how to rebuild (cache key, store or arrays), never connections or handles
        return {"recipe": self._built.recipe, "verbose": self.verbose, "query": self.mode,
                "mask": self._mask, "batcher": self._cursor.snapshot(), "select": self._select_rng}

    def __setstate__(self, state: dict) -> None:
        self._attach(restore(state["recipe"]), state["verbose"])
        self.mode, self._mask, self._select_rng = state["query"], state["mask"], state["select"]
        self._padding.pending = False  # a copy (a worker's): the original says it
        self._cursor.restore(state["batcher"])

    __repr__ = text_repr
    _repr_html_ = repr_html
