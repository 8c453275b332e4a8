"""Progress bars: tqdm in the main process when ``verbose``, a silent stand-in otherwise.

The one place that imports tqdm (lazily): nothing is ever printed unless a caller asked for it.
"""

from __future__ import annotations

__all__ = ["progress_bar"]


class _Silent:
    """A bar that shows nothing."""

    def update(self, n: int) -> None:
        """Ignore progress."""

    def close(self) -> None:
        """Nothing to close."""


def progress_bar(total: int, verbose: bool, desc: str, unit: str = "file", announce: str | None = None):
    """A tqdm bar of ``total`` units (bytes are scaled when ``unit="B"``) when ``verbose``, else a silent one.

    ``announce`` is printed above the bar first (e.g. the size about to be written).
    """
    if not verbose:
        return _Silent()
    from tqdm.auto import tqdm  # noqa: PLC0415  (only when asked for)

    if announce:
        tqdm.write(announce)
    scaled = unit == "B"
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=scaled, unit_divisor=1024 if scaled else 1000)
