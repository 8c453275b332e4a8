"""The benchmark runner's section handling (benchmarks/sections.py): retry once, skip with the reason, never
stop the run; a missing dependency is skipped without a retry; dependants of a failed section are skipped."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import render  # noqa: E402
from benchmarks.sections import run_sections  # noqa: E402
from benchmarks.suite import QUICK  # noqa: E402


class _Sections:
    """Sections that fail for real: an import of a module that does not exist, a file read before the file
    exists, a write into a folder that is a file."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.calls, self.results = tmp, [], {"settings": {**QUICK.__dict__}, "peers": {}}

    def grid(self) -> None:  # a missing dependency
        self.calls.append("grid")
        self.results["grid"] = ["half written"]
        import consumer_benchmark_dependency_that_is_not_installed  # noqa: F401

    def filesize(self) -> None:  # fails once: its input appears only after the first attempt
        self.calls.append("filesize")
        source = self.tmp / "input.txt"
        try:
            self.results["input"] = source.read_text()
        finally:
            source.write_text("late")

    def workloads(self) -> None:  # fails every time
        self.calls.append("workloads")
        (self.tmp / "blocked").write_text("a file")
        (self.tmp / "blocked" / "out.json").write_text("{}")

    def limits(self) -> None:  # reads what workloads writes
        self.calls.append("limits")

    def scale(self) -> None:
        self.calls.append("scale")
        self.results["scale"] = []


def test_sections_are_retried_skipped_or_run_and_the_run_goes_on(tmp_path) -> None:
    run = _Sections(tmp_path)
    logged: list[str] = []
    done: list[str] = []
    failed = run_sections(run, ["grid", "filesize", "workloads", "limits", "scale"], retry_pause_s=0.01,
                          log=lambda *a: logged.append(" ".join(map(str, a))), done=done.append)
    assert run.calls == ["grid", "filesize", "filesize", "workloads", "workloads", "scale"]
    assert done == ["grid", "filesize", "workloads", "limits", "scale"]
    assert set(failed) == {"grid", "workloads", "limits"}
    assert failed["grid"]["attempts"] == 1 and failed["grid"]["reason"].startswith("missing dependency: ")
    assert "consumer_benchmark_dependency_that_is_not_installed" in failed["grid"]["reason"]
    assert failed["workloads"]["attempts"] == 2 and "NotADirectoryError" in failed["workloads"]["reason"]
    assert failed["limits"] == {"reason": "needs the outputs of section 'workloads', which failed", "attempts": 0}
    assert "grid" not in run.results  # what a failed section had written is gone
    assert run.results["input"] == "late"  # the retry succeeded
    assert set(run.results["section_s"]) == set(done)
    assert any("retrying" in line for line in logged)
    text = render(run.results, "python -m benchmarks run --quick", [])
    assert "## Sections not measured in this run" in text
    for name in ("grid", "workloads", "limits"):
        assert f"- **{name}**: " in text
    assert "(2 attempts)" in text
