"""Running the sections of a benchmark run so that one failing section cannot end the run.

A section (a method of :class:`benchmarks.suite.Run`) that raises is handled by :func:`run_sections`:

- a missing dependency (``ImportError``, which :class:`consumer.errors.MissingDependencyError` is) is not
  retried: the section is skipped and the reason recorded, like a missing peer;
- any other failure (a local server that did not start on a busy machine, a scratch folder that cannot be
  written, ...) is retried once after a pause of ``retry_pause_s`` seconds (the second try gets a machine
  that is often less busy); when it fails again the section is skipped with the reason of the last failure.

Skipped sections are recorded in ``results["failed_sections"]`` as ``{name: {"reason": str, "attempts": int}}``
and the report lists them at the top (:func:`render_failed`); whatever a failed section had written into
the results is removed, so the report never shows half a section. Sections that read what an earlier
section wrote (``limits`` and ``loader`` read the stores of ``workloads``) are skipped with that reason
when the earlier one failed. ``KeyboardInterrupt`` still stops the run.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence

__all__ = ["DEPENDS", "RESULT_KEYS", "run_sections", "render_failed"]

# section -> the section whose outputs it reads
DEPENDS = {"limits": "workloads", "loader": "workloads", "warmfetch": "coldfetch"}
RESULT_KEYS = {"workloads": ("workloads", "notes"), "scale": ("scale", "scale_table")}  # default: (name,)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return f"{type(exc).__name__}: {text[0] if text else ''}{at}"


def run_sections(run, order: Sequence[str], *, retry_pause_s: float = 5.0,
                 log: Callable[..., None] = print, done: Callable[[str], None] | None = None) -> dict:
    """Run each section of ``order`` (method names of ``run``), timing them into ``run.results["section_s"]``;
    a failing section is retried or skipped as the module docstring says. Returns ``results["failed_sections"]``
    (empty when every section ran). ``done(name)`` is called after each section, failed or not."""
    failed = run.results.setdefault("failed_sections", {})
    for name in order:
        t = time.perf_counter()
        need = DEPENDS.get(name)
        if need in failed:
            failed[name] = {"reason": f"needs the outputs of section {need!r}, which failed", "attempts": 0}
        else:
            attempts = 0
            while True:
                attempts += 1
                try:
                    getattr(run, name)()
                    break
                except KeyboardInterrupt:
                    raise
                except ImportError as exc:  # a missing dependency: no retry
                    failed[name] = {"reason": "missing dependency: " + _reason(exc), "attempts": attempts}
                except (Exception, SystemExit) as exc:  # noqa: BLE001  (any failure of one section)
                    if attempts < 2:
                        log(f"section {name} failed ({_reason(exc)}); retrying in {retry_pause_s:g} s")
                        _drop(run.results, name)
                        time.sleep(retry_pause_s)
                        continue
                    failed[name] = {"reason": _reason(exc), "attempts": attempts}
                break
        if name in failed:
            _drop(run.results, name)
            log(f"section {name} skipped: {failed[name]['reason']}")
        run.results.setdefault("section_s", {})[name] = time.perf_counter() - t
        if done is not None:
            done(name)
    return failed


def _drop(results: dict, name: str) -> None:
    for key in RESULT_KEYS.get(name, (name,)):
        results.pop(key, None)


def render_failed(res: dict) -> list[str]:
    """The report's lines naming each skipped section and why (none when every section ran)."""
    failed = res.get("failed_sections") or {}
    if not failed:
        return []
    out = ["## Sections not measured in this run", "",
           "These sections failed (after a retry, unless a dependency was missing) and were skipped; the rest "
           "of the run went on. Their tables are absent below.", ""]
    for name, f in failed.items():
        tries = f.get("attempts", 0)
        out.append(f"- **{name}**: {f['reason']}" + (f" ({tries} attempts)" if tries > 1 else "") + ".")
    return out + [""]
