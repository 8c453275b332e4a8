"""What each section of a suite run shows, next to its targets: one module per section, each with
``render_section(results) -> list[str]`` (markdown lines; none when the section did not run) and
``verdicts(results) -> list[dict]`` (one ``{"target", "figure", "met", "why"}`` per target of the section).

Sections measured by a probe keep both functions in the probe module (``benchmarks/probes/``);
:mod:`benchmarks.report` lists every section in report order.
"""
