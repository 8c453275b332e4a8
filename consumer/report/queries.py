"""The SQL behind every number of the report: one :class:`Queries` value per dataset makes each panel's statement.

Every statement reads one relation through :attr:`Queries.relation`: ``files`` for a dataset of files, ``documents``
for documents inside containers (``documents="jsonl"``, ...), where :mod:`consumer.report.containers` adds the
per-container statements. A report over another relation is a :class:`Queries` with another ``relation`` and
``unit`` and nothing else.
The statements are plain DuckDB SQL that ``ds.sql`` runs as they are: the page shows each one beside its numbers.

Samples and PAD follow the dataset's style (see ``consumer/tokens/index.py``):

- ``diff`` with ``long_files`` ``truncate``/``crop``: one row per file, ``least(tokens, seqlen)`` real tokens;
- ``diff`` with ``windows``: ``ceil(tokens / seqlen)`` rows per file, every token real;
- ``concat``: per class ``ceil(sum(tokens) / seqlen)`` rows, every token real;
- ``packed``: best-fit decreasing has no closed form in SQL, so its rows and PAD come from the sample index (the
  dataset's own ``seqlen``) or from the packing plan (:mod:`consumer.report.plans`); the statements of a packed
  dataset leave them out and keep what SQL does give exactly (its truncated tokens).

:meth:`Queries.style_choices` sets diff and concat side by side at every ``seqlen`` choice: rows, PAD and the share of
documents cut (not whole in one row). A ``diff`` row cuts the documents longer than ``seqlen`` (truncated, or split
into windows); ``concat`` cuts every document that crosses a window edge, found exactly from its position in its
class's stream (``sum(tokens)`` of the class's earlier documents, in id order: each class's stream starts on a window
boundary); ``packed`` cuts only the documents longer than ``seqlen``, like ``diff``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Queries", "SEQLEN_CHOICES"]

SEQLEN_CHOICES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))
"""The percentile choices of ``seqlen`` the padding panel compares (``seqlen="auto:pNN"`` resolves to the same)."""

_TOP_TYPES = 5  # types shown per class
_EXTREMES = 5  # largest and smallest files listed
_DUPLICATE_GROUPS = 10  # duplicate groups listed (the largest waste first)


@dataclass(frozen=True)
class Queries:
    """The statements of one report: ``relation`` the SQL relation (``"files"``, or ``"documents"`` for
    documents inside containers), ``unit`` what one row is (``"files"`` or ``"documents"``),
    and the settings the PAD arithmetic needs (``style``, ``long_files``, ``seqlen``)."""

    style: str
    long_files: str
    seqlen: int
    relation: str = "files"
    unit: str = "files"

    @property
    def diff_long_files(self) -> str:
        """The ``long_files`` of the ``diff`` figures of :meth:`style_choices`: the dataset's when it is ``diff``,
        else diff's default (``truncate``)."""
        return self.long_files if self.style == "diff" else "truncate"

    @property
    def packed_long_files(self) -> str:
        """The ``long_files`` of the ``packed`` figures: the dataset's when it is ``packed``, else packed's default
        (``windows``)."""
        return self.long_files if self.style == "packed" else "windows"

    @property
    def id_column(self) -> str:
        """The relation's row id (``file_id`` of ``files``, ``doc_id`` of ``documents``): the order of ties."""
        return "doc_id" if self.relation == "documents" else "file_id"

    def _rows_real(self, seqlen: str, style: str | None = None, long_files: str | None = None,
                   tokens: str = "tokens") -> tuple[str, str, str]:
        """SQL aggregates (rows, real tokens, truncated tokens) of a group of rows at ``seqlen`` (an SQL term), for
        ``style`` and ``long_files`` (default: the dataset's; not ``packed``, whose rows SQL can't give)."""
        style = self.style if style is None else style
        long_files = self.long_files if long_files is None else long_files
        if style == "concat":
            return f"CAST(ceil(sum({tokens}) / {seqlen}) AS BIGINT)", f"sum({tokens})", "0"
        if long_files == "windows":
            return f"CAST(sum(ceil({tokens} / {seqlen})) AS BIGINT)", f"sum({tokens})", "0"
        return "count(*)", f"sum(least({tokens}, {seqlen}))", f"sum(greatest({tokens} - {seqlen}, 0))"

    def overview(self) -> str:
        """Rows, bytes, tokens, classes and empty rows of the whole relation."""
        return (f"SELECT count(*) AS {self.unit}, sum(size) AS bytes, sum(tokens) AS tokens, "
                f"count(DISTINCT class) AS classes, count(*) FILTER (WHERE size = 0) AS empty "
                f"FROM {self.relation}")

    def per_class(self) -> str:
        """Files, bytes, tokens, samples and the PAD share (%) of every class at the dataset's ``seqlen`` (for
        ``packed``: files, bytes and tokens; the samples and PAD come from the sample index)."""
        if self.style == "packed":
            return (f"SELECT class, count(*) AS {self.unit}, sum(size) AS bytes, sum(tokens) AS tokens "
                    f"FROM {self.relation} GROUP BY class ORDER BY class")
        rows, real, _ = self._rows_real(str(self.seqlen))
        return (f"SELECT class, count(*) AS {self.unit}, sum(size) AS bytes, sum(tokens) AS tokens, "
                f"{rows} AS samples, round(100 * (1 - {real} / ({rows} * {self.seqlen})), 2) AS pad_pct "
                f"FROM {self.relation} GROUP BY class ORDER BY class")

    def _choices(self) -> str:
        """The ``WITH`` terms ``q`` and ``choices`` (``choice``, ``seqlen``, ``position``): the dataset's ``seqlen``,
        each percentile choice and the longest document."""
        names = ["'current'"] + [f"'{name}'" for name, _ in SEQLEN_CHOICES] + ["'max'"]
        values = [str(self.seqlen)] + [f"greatest(quantile_disc(tokens, {q}), 1)" for _, q in SEQLEN_CHOICES] + \
            ["max(tokens)"]
        cols = ", ".join(f"{v} AS v{i}" for i, v in enumerate(values))
        return (f"WITH q AS (SELECT {cols} FROM {self.relation}), "
                f"choices AS (SELECT unnest([{', '.join(names)}]) AS choice, "
                f"unnest([{', '.join(f'v{i}' for i in range(len(values)))}]) AS seqlen, "
                f"unnest(range({len(values)})) AS position FROM q) ")

    def seqlen_choices(self) -> str:
        """For the dataset's ``seqlen`` and each percentile choice: rows, PAD share and truncated share (%) in the
        dataset's style (``packed``: the truncated share only; its rows are the packing plan's)."""
        if self.style == "packed":
            truncated = "0" if self.long_files == "windows" else "sum(greatest(t.tokens - c.seqlen, 0))"
            return (self._choices() + f"SELECT c.choice, c.seqlen, round(100 * {truncated} / sum(t.tokens), 2) "
                    f"AS truncated_pct FROM choices AS c, {self.relation} AS t "
                    "GROUP BY c.choice, c.seqlen, c.position ORDER BY c.position")
        inner = self._rows_real("c.seqlen")
        group = "c.choice, c.seqlen, c.position" + (", t.class" if self.style == "concat" else "")
        per = (f"SELECT c.choice, c.seqlen, c.position, {inner[0]} AS samples, {inner[1]} AS real_tokens, "
               f"{inner[2]} AS truncated, sum(tokens) AS tokens "
               f"FROM choices AS c, {self.relation} AS t GROUP BY {group}")
        return (self._choices() + "SELECT choice, seqlen, sum(samples) AS samples, "
                "round(100 * (1 - sum(real_tokens) / (sum(samples) * seqlen)), 2) AS pad_pct, "
                "round(100 * sum(truncated) / sum(tokens), 2) AS truncated_pct "
                f"FROM ({per}) GROUP BY choice, seqlen, position ORDER BY position")

    def style_choices(self) -> str:
        """For every ``seqlen`` choice, ``diff`` (with :attr:`diff_long_files`) and ``concat`` side by side: rows,
        PAD share (%) and the share of documents cut (%, not whole in one row; see the module docstring)."""
        diff_rows, diff_real, _ = self._rows_real("c.seqlen", "diff", self.diff_long_files, "d.tokens")
        concat_rows = self._rows_real("c.seqlen", "concat", tokens="d.tokens")[0]
        stream = (f"d AS (SELECT class, tokens, sum(tokens) OVER (PARTITION BY class ORDER BY {self.id_column} "
                  f"ROWS UNBOUNDED PRECEDING) - tokens AS pos FROM {self.relation}) ")
        per = (f"SELECT c.choice, c.seqlen, c.position, count(*) AS documents, sum(d.tokens) AS tokens, "
               f"{diff_rows} AS diff_rows, {diff_real} AS diff_real, "
               "count(*) FILTER (WHERE d.tokens > c.seqlen) AS longer, "
               f"{concat_rows} AS concat_rows, "
               "count(*) FILTER (WHERE d.pos // c.seqlen <> (d.pos + d.tokens - 1) // c.seqlen) AS crossing "
               "FROM choices AS c, d GROUP BY c.choice, c.seqlen, c.position, d.class")
        return (self._choices() + ", " + stream + "SELECT choice, seqlen, sum(diff_rows) AS diff_rows, "
                "round(100 * (1 - sum(diff_real) / (sum(diff_rows) * seqlen)), 2) AS diff_pad_pct, "
                "round(100 * sum(longer) / sum(documents), 2) AS diff_cut_pct, "
                "sum(concat_rows) AS concat_rows, "
                "round(100 * (1 - sum(tokens) / (sum(concat_rows) * seqlen)), 2) AS concat_pad_pct, "
                "round(100 * sum(crossing) / sum(documents), 2) AS concat_cut_pct "
                f"FROM ({per}) GROUP BY choice, seqlen, position ORDER BY position")

    def types(self, column: str) -> str:
        """The most frequent values of ``column`` (``mime``, ``description`` or ``header``) in each class."""
        return (f"SELECT class, {column}, {self.unit}, bytes FROM (SELECT class, {column}, count(*) AS {self.unit}, "
                f"sum(size) AS bytes, row_number() OVER (PARTITION BY class ORDER BY count(*) DESC, {column}) AS r "
                f"FROM {self.relation} GROUP BY class, {column}) WHERE r <= {_TOP_TYPES} ORDER BY class, r")

    def sizes(self) -> str:
        """Per class, how many rows fall in each power-of-two size bin (``-1``: empty; ``b``: ``2**b <= size <
        2**(b+1)`` bytes)."""
        return (f"SELECT class, CAST(CASE WHEN size = 0 THEN -1 ELSE floor(log2(size)) END AS INTEGER) AS log2_size, "
                f"count(*) AS {self.unit} FROM {self.relation} GROUP BY ALL ORDER BY class, log2_size")

    def size_quantiles(self) -> str:
        """Per class the smallest, median, 90th percentile and largest size in bytes."""
        return (f"SELECT class, min(size) AS min, quantile_disc(size, 0.5) AS p50, quantile_disc(size, 0.9) AS p90, "
                f"max(size) AS max FROM {self.relation} GROUP BY class ORDER BY class")

    def content_histogram(self, column: str, step: float, top: float) -> str:
        """Per type (MIME), rows in each bin of ``column`` (``entropy`` or ``printable``) of width ``step``."""
        return (f"SELECT coalesce(mime, '(unknown)') AS type, round(least(floor({column} / {step}) * {step}, "
                f"{top - step}), 2) AS bin, count(*) AS {self.unit} FROM {self.relation} "
                f"WHERE {column} IS NOT NULL GROUP BY ALL ORDER BY type, bin")

    def content_known(self) -> str:
        """How many rows have their content columns computed."""
        return f"SELECT count(*) FILTER (WHERE sha256 IS NOT NULL) AS with_content, count(*) AS {self.unit} " \
               f"FROM {self.relation}"

    def duplicates(self) -> str:
        """Groups of rows with equal bytes: how many, the redundant copies, the bytes they waste, and how many
        groups cross classes."""
        return ("SELECT count(*) AS groups, coalesce(sum(copies - 1), 0) AS redundant_copies, "
                "coalesce(sum((copies - 1) * size), 0) AS wasted_bytes, count(*) FILTER (WHERE classes > 1) "
                "AS cross_class_groups FROM (SELECT sha256, count(*) AS copies, min(size) AS size, "
                f"count(DISTINCT class) AS classes FROM {self.relation} WHERE sha256 IS NOT NULL "
                "GROUP BY sha256 HAVING count(*) > 1)")

    def duplicate_groups(self) -> str:
        """The duplicate groups that waste the most bytes."""
        return ("SELECT left(sha256, 16) AS sha256, min(size) AS size, count(*) AS copies, "
                "(count(*) - 1) * min(size) AS wasted_bytes, count(DISTINCT class) AS classes "
                f"FROM {self.relation} WHERE sha256 IS NOT NULL GROUP BY sha256 HAVING count(*) > 1 "
                f"ORDER BY wasted_bytes DESC, sha256 LIMIT {_DUPLICATE_GROUPS}")

    def largest(self) -> str:
        """The largest rows."""
        return (f"SELECT path, class, size FROM {self.relation} ORDER BY size DESC, {self.id_column} "
                f"LIMIT {_EXTREMES}")

    def smallest(self) -> str:
        """The smallest rows that are not empty."""
        return (f"SELECT path, class, size FROM {self.relation} WHERE size > 0 ORDER BY size, {self.id_column} "
                f"LIMIT {_EXTREMES}")

    def empty(self) -> str:
        """Some empty rows (the overview counts them all)."""
        return (f"SELECT path, class FROM {self.relation} WHERE size = 0 ORDER BY {self.id_column} "
                f"LIMIT {_EXTREMES}")
