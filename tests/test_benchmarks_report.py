"""``docs/benchmarks.md`` comes from one run: every section is rendered from a results dict by a view.

- every ``##`` heading of the committed report is written by the benchmark code (no hand-maintained section);
- every probe-run section (``benchmarks/suite_probe_runs.py``) renders its heading whether it ran or not, and a
  probe whose results lack keys renders "not measured"/"—" instead of failing;
- a few cheap sections really run (quick sizes) and their figures appear in the report and the *Targets* table.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.markdown import fmt, keep_hand_added  # noqa: E402
from benchmarks.report import VIEWS, render  # noqa: E402
from benchmarks.suite import QUICK, Run  # noqa: E402
from benchmarks.suite_probe_runs import SPECS  # noqa: E402


def _bare() -> dict:
    return {"settings": asdict(QUICK), "env": {}, "peers": {}}


def _code_text() -> str:
    files = [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks" / "views").glob("*.py"),
             *(ROOT / "benchmarks" / "probes").glob("*.py")]
    return "\n".join(p.read_text(encoding="utf-8") for p in files)


def test_every_heading_of_the_committed_report_is_written_by_the_code() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    code = _code_text()
    headings = [ln[3:] for ln in text.splitlines() if ln.startswith("## ")]
    assert headings, "docs/benchmarks.md has no sections"
    hand = [h for h in headings if f"## {h}" not in code and f'"{h}"' not in code]
    assert not hand, f"sections of docs/benchmarks.md no view renders (hand-maintained): {hand}"


def test_every_probe_run_section_has_a_view_and_says_when_it_was_not_measured() -> None:
    viewed = [name for name, _, _ in VIEWS]
    assert set(SPECS) - {"warmfetch", "floors"} <= set(viewed)  # those two render inside coldfetch / contentfloor
    text = render(_bare(), "python -m benchmarks run --full", [])
    for section in set(SPECS) - {"warmfetch", "floors"}:
        assert f"--sections {section}`" in text, section
    assert text.count("Not measured in this run") >= len(SPECS)


@pytest.mark.parametrize("section", sorted(SPECS))
def test_a_probe_without_its_keys_renders_as_not_measured(section: str) -> None:
    res = _bare()
    res[section] = {"runs": {sub: {"probe": probe, "command": f"python -m benchmarks probe {probe}",
                                   "load_average": [1.0, 1.0, 1.0], "duration_s": 1.0, "results": {}}
                             for sub, probe, _, _ in SPECS[section]}}
    text = render(res, "python -m benchmarks run --full", [])
    assert f"python -m benchmarks probe {SPECS[section][0][1]}" in text
    for _, _, verdicts in VIEWS:
        for v in verdicts(res):
            assert v["met"] in (None, "floor") or v["figure"] != "—", v


def test_cheap_sections_run_and_their_figures_reach_the_report(tmp_path) -> None:
    run = Run(QUICK, str(tmp_path / "work"), str(tmp_path / "data"), {}, [], log=lambda *a: None)
    run.results["env"] = {}
    for section in ("batchorder", "contentfloor", "sqlmargin"):
        getattr(run, section)()
    res = run.results
    order = res["batchorder"]["runs"][""]["results"]
    content = res["contentfloor"]["runs"][""]["results"]["gb_per_s"]
    margin = res["sqlmargin"]["runs"][""]["results"]
    assert order["samples"] == 20000 and order["floor_s"] > 0
    text = render(res, "python -m benchmarks run --quick --sections batchorder,contentfloor,sqlmargin", [])
    assert f"| {fmt(order['natural_vs_floor'])} |" in text
    assert f"{fmt(content['pass_vs_floor_numpy'])} of the floor" in text  # the Targets row, from the run
    assert f"largest overshoot {fmt(margin['max_over_s'])} s" in text
    assert "python -m benchmarks probe batch_order --samples 20000 --repeat 1" in text
    for title in ("The one batch order", "The content pass on a large file against its floor", "SQL timeout margin"):
        section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
        assert "Not measured in this run" not in section, title


def test_a_re_render_keeps_the_sections_added_by_hand():
    block = ("<!-- hand-added section (issue 9) -->\n### By hand\n\n| a |\n"
             "<!-- end of the hand-added section (issue 9) -->\n")
    old = f"# Report\n\n## One\n\nold figures\n\n{block}\n## Two\n\nmore\n"
    new = "# Report\n\n## One\n\nnew figures\n\n## Two\n\nmore\n"
    kept = keep_hand_added(old, new)
    assert kept == f"# Report\n\n## One\n\nnew figures\n\n{block}\n## Two\n\nmore\n"
    assert keep_hand_added(old, kept) == kept  # not twice
    moved = keep_hand_added(old, "# Report\n\n## One\n\nnew\n")  # its heading gone: at the end
    assert moved.endswith(block) and moved.count("### By hand") == 1
    assert keep_hand_added("# no blocks\n", new) == new
