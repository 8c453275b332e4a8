"""The corpus report: one self-contained HTML page per dataset (``ds.report(path)``, ``consumer report``).

``queries`` holds the SQL of every panel, ``panels`` runs it and shapes the numbers, ``plans`` gives the packed
style's rows and PAD (from the sample index or the packing plan: best-fit packing has no SQL), ``containers`` adds the
per-container panel of a records dataset (documents inside files), ``svg`` draws the charts
(hand-written SVG from numpy: no plotting library), ``samples`` decodes the first samples, ``page`` escapes
and assembles the HTML, ``write`` ties them together (docs/report.md)."""

from .write import fingerprint, render_report, write_report

__all__ = ["fingerprint", "render_report", "write_report"]
