"""The open-scale probe (``benchmarks/probes/open_scale.py``) at a tiny size, and its section of the report rendered
from the probe's own document (``python -m benchmarks report RESULTS --add-probe openscale=DOC``). No timing is
asserted."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.registry import run_probe  # noqa: E402
from benchmarks.report import render  # noqa: E402
from benchmarks.suite import QUICK  # noqa: E402
from benchmarks.suite_probe_runs import add_probe_document  # noqa: E402


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("open_scale")
    out = work / "doc.json"
    run_probe("open_scale", ["--docs", "3000", "--repeat", "1", "--skip-megatron", "--dir", str(work),
                             "--out", str(out)])
    return out


def test_the_probe_writes_a_store_and_measures_every_open(document: Path) -> None:
    r = json.loads(document.read_text())["results"]
    row = r["sizes"]["3000"]
    store, ours = row["store"], row["consumer"]
    assert store["documents"] == 3000 and store["bin_bytes"] == 2 * store["tokens"]
    assert ours["first_open"]["index"] == "miss" and ours["reopen_best"]["index"] == "hit"
    assert ours["sql_best"]["answer"] == [[3000, store["tokens"]]]  # count(*), sum(length) of the store
    assert "megatron" not in row and not list(Path(document.parent).glob("open_scale-*"))  # stores removed


def test_its_section_renders_from_the_document(document: Path) -> None:
    res = {"settings": asdict(QUICK), "env": {}, "peers": {}}
    add_probe_document(res, f"openscale={document}")
    text = render(res, "python -m benchmarks run --full", [])
    section = text.split("## Opening a .bin/.idx store", 1)[1].split("\n## ", 1)[0]
    assert "Run alone (" in section and "python -m benchmarks probe open_scale --docs 3000" in section
    assert "| 3,000 |" in section and "megatron-core was not measured in this run." in section


def test_a_document_goes_only_to_its_own_section(document: Path) -> None:
    with pytest.raises(ValueError, match="--add-probe expects SECTION=PATH"):
        add_probe_document({}, f"nosuchsection={document}")
    with pytest.raises(ValueError, match="expected a document of probe 'chunksums'"):
        add_probe_document({}, f"chunksums={document}")
