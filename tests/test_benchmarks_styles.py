"""The probes of issue #36 (``packed_plan``, ``style_report``, ``style_fetch``, ``objective_costs``) at tiny sizes,
and their two sections of the report rendered from the probes' own documents (``python -m benchmarks report
RESULTS --add-probe styles=DOC --add-probe objectives=DOC``). No timing is asserted."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.registry import run_probe  # noqa: E402
from benchmarks.report import VIEWS, render  # noqa: E402
from benchmarks.suite import QUICK  # noqa: E402
from benchmarks.suite_probe_runs import add_probe_document  # noqa: E402

_ARGS = {"packed_plan": ["--docs", "2000", "--classes", "1,2"],
         "style_report": ["--demo-max-files", "5", "--demo-seqlens", "512", "--records", "300", "--shards", "2"],
         "style_fetch": ["--files", "300", "--reps", "2"],
         "objective_costs": ["--files", "300", "--reps", "2", "--fresh-reps", "0", "--cu-files", "600",
                             "--cu-batch", "16", "--cu-reps", "2"]}


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("styles")
    out = {}
    for probe, argv in _ARGS.items():
        out[probe] = work / f"{probe}.json"
        run_probe(probe, [*argv, "--out", str(out[probe])])
    return out


def _bare() -> dict:
    return {"settings": asdict(QUICK), "env": {}, "peers": {}}


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_each_probe_of_a_section_goes_to_its_own_run(documents: dict[str, Path]) -> None:
    res = _bare()
    add_probe_document(res, f"styles={documents['packed_plan']}")
    add_probe_document(res, f"styles={documents['style_fetch']}")
    assert set(res["styles"]["runs"]) == {"plan", "fetch"}  # the second document kept the first
    text = render(res, "python -m benchmarks run --full", [])
    section = _section(text, "Pretraining rows: packed against concat and diff")
    assert "Run alone (" in section and "python -m benchmarks probe packed_plan --docs 2000" in section
    assert "**Planning 2,000 documents**" in section and "**Fetching packed rows" in section
    assert "What each style makes of a corpus" not in section  # style_report was not added
    with pytest.raises(ValueError, match="expected a document of probe 'packed_plan' or 'style_report' or "
                                         "'style_fetch'"):
        add_probe_document(res, f"styles={documents['objective_costs']}")
    with pytest.raises(ValueError, match="expected a document of probe 'objective_costs'"):
        add_probe_document(res, f"objectives={documents['style_fetch']}")


def test_both_sections_render_from_the_documents(documents: dict[str, Path]) -> None:
    res = _bare()
    for probe in ("packed_plan", "style_report", "style_fetch"):
        add_probe_document(res, f"styles={documents[probe]}")
    add_probe_document(res, f"objectives={documents['objective_costs']}")
    text = render(res, "python -m benchmarks run --full", [])
    styles = _section(text, "Pretraining rows: packed against concat and diff")
    objectives = _section(text, "Causal labels and document columns against the plain query")
    assert "Not measured in this run" not in styles + objectives
    assert "| 2 | packed |" in styles and "A JSONL corpus: 300 records in 2 files" in styles
    assert "| store packed |" in styles and "| own store packed |" in styles
    assert "Target: packed ≤ 1.10× concat." in styles
    assert "`style=\"packed\"`" in objectives and "| causal (`\"causal\"`) |" in objectives
    assert "**`cu_seqlens` of a 16 × 2048 batch**" in objectives
    targets = [v for name, _, verdicts in VIEWS if name in ("styles", "objectives") for v in verdicts(res)]
    # 2,000 documents are not the target's 10^7: that one is not measured; every other target has its figure
    assert [v["met"] for v in targets].count(None) == 1 and all(v["figure"] != "—" for v in targets[1:])
