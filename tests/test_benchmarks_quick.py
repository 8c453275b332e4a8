"""Smoke test of the benchmark harness: ``python -m benchmarks run --quick`` end to end, without peers.

It checks that the run completes, that the report and its results file exist with every table, that the
``consumer`` rows were measured (positive times, rows equal to the naive reader's) and that absent peers and
the absent loader are reported as such. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[Path, dict, str]:
    """One quick run (no peers) into a temporary folder: the report path, the results and the report text."""
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "docs" / "benchmarks.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--quick", "--peers", "none", "--out", str(out),
                           "--data", str(tmp / "data"), "--work", str(tmp / "work")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    return out, results, out.read_text(encoding="utf-8")


def test_report_has_every_section(quick_run) -> None:
    out, _, text = quick_run
    assert out.exists()
    for heading in ("# Benchmarks", "## Peers in this run", "## Targets", "## Fetch on the same bytes",
                    "### small-diff", "### small-concat", "### lognormal-diff", "### lognormal-concat",
                    "### small-gpt", "## Packed fetch against the machine's limits",
                    "## Fetch paths: per call, packed against the gather floor, raw against the naive reader",
                    "## Loaders",
                    "## Fetch against file size", "## consumer across settings", "## Build and reopen",
                    "## Content pass", "## Cold build with headers against gperc", "## Remote sources",
                    "## GPU feed: training from the loader", "## Scale-out on Dask"):
        assert heading in text, heading
    assert "python -m benchmarks run --quick --peers none" in text
    assert "## Sections not measured in this run" not in text, text[:3000]  # every section ran


def test_consumer_rows_measured_and_equal_to_naive(quick_run) -> None:
    _, res, _ = quick_run
    for key in ("small-diff", "small-concat", "lognormal-diff", "lognormal-concat"):
        for b, entry in res["workloads"][key]["batch"].items():
            systems = entry["systems"]
            for label in ("consumer raw", "consumer packed", "naive reader"):
                row = systems[label]
                assert row["error"] is None, (key, b, label, row["error"])
                assert len(row["per_rep"]) == res["settings"]["reps"] and row["median_s"] > 0
                assert row["equal_rows"] is True, (key, b, label)
    grid = res["grid"]
    assert len(grid) == 2 * 2 * 2 * 2 * 2 * 2  # source x style x n_bytes x seqlen x batch x query
    assert all(r["ms"] > 0 and r["tokens_per_s"] > 0 for r in grid)
    assert {r["query"] for r in grid} == {"supervised", "mlm"}
    assert all(r["equal_rows"] for r in res["filesize"])


def test_fetch_paths_measured_with_equal_rows(quick_run) -> None:
    _, res, text = quick_run
    fp = res["fetchpaths"]
    assert all(info["rows_equal"] is True for info in fp["raw"].values())
    for info in fp["per_call"].values():
        for timed in info["batch"].values():
            assert not any(label.startswith(("Megatron", "mosaic")) for label in timed)  # no peers: no peer rows
            assert all(row["error"] is None and row["median_s"] > 0 for row in timed.values())
    assert "against the peers: not measured (no peer ran)" in text


def test_absent_parts_are_reported_not_invented(quick_run) -> None:
    _, res, text = quick_run
    assert all(not p["available"] for p in res["peers"].values())
    for name in ("gperc", "hf", "megatron", "litdata", "mosaic", "daft", "lance"):
        assert f"| {name} | no |" in text
    systems = res["workloads"]["small-diff"]["batch"]["20"]["systems"]
    assert not any(label.startswith(("HF", "Megatron", "litdata", "mosaic", "gperc")) for label in systems)
    loader = res["loader"]
    assert loader["systems"]["torch DataLoader transport (memcpy dataset)"]["0"]["batches_per_s"] > 0
    if "consumer ds.dataloader" in loader["absent"]:
        assert "loader not available in this version" in text
    else:
        measured = set(loader["systems"]["torch DataLoader transport (memcpy dataset)"])
        assert set(loader["systems"]["consumer ds.dataloader"]) == measured and "0" in measured


def test_peer_sections_come_from_their_probes_with_equal_answers(quick_run) -> None:
    """The catalog, cold-store and Lance sections run their probes; without peers, consumer is measured
    against DuckDB and the pread floor, and Daft and Lance are reported absent."""
    _, res, text = quick_run
    for heading in ("## Catalog to the first answer, and the byte predicate, against Daft and DuckDB",
                    "## Cold store: random fetch from a store that is not in memory",
                    "## Random fetch against Lance, cold and warm"):
        assert heading in text, heading
    catalog = res["catalog"]
    assert catalog["command"].startswith("python -m benchmarks probe catalog_peers --files ")
    for size in catalog["sizes"].values():
        assert set(size["systems"]) == {"consumer", "duckdb"} and "daft" in size["absent"]
        assert all(r["answers_equal"] is True and r["first_answer_s"] > 0 for r in size["systems"].values())
    cold = res["coldstore"]["readers"]
    assert set(cold) == {"consumer", "pread"}
    assert all(r["rows_equal_floor"] is True and r["ms_per_batch"] > 0 for r in cold.values())
    assert cold["pread"]["x_floor"] == 1.0
    lance = res["lance"]["batch"]
    assert set(lance) == {"20", "1"}
    assert all(set(entry["readers"]) == {"consumer", "pread"} for entry in lance.values())
    assert "cold fetch ≤ 1.3× the pread floor" in text  # the section's own verdict is in the Targets table


def test_scale_rows_come_from_fresh_processes(quick_run) -> None:
    _, res, _ = quick_run
    rows = res["scale"]
    assert [r["files"] for r in rows] == list(res["settings"]["scale_sizes"])
    for r in rows:
        assert r["plain"]["cold"]["cache"] == "miss" and r["plain"]["warm"]["cache"] == "hit"
        assert r["plain"]["cold"]["files"] == r["files"]


def test_scale_table_and_loader_transports_are_measured(quick_run) -> None:
    _, res, text = quick_run
    table = res["scale_table"]
    assert [r["files"] for r in table] == list(res["settings"]["table_sizes"])
    for r in table:
        assert "error" not in r, r
        assert r["peak_rss_mb"] > r["import_rss_mb"] > 0 and r["build_s"] > 0
        assert r["samples"] >= r["files"] and r["reopen_s"] > 0
    assert "### The in-memory structures up to 10^7 files" in text
    systems = res["loader"]["systems"]
    workers = {w for w in res["settings"]["workers"] if w}
    for label in ("consumer ds.dataloader, each batch copied out", "consumer ds.dataloader, transport='torch'"):
        assert {int(w) for w in systems[label] if int(w)} == workers, label
        assert all(v["batches_per_s"] > 0 for v in systems[label].values())


def test_a_failing_section_is_skipped_with_its_reason_and_the_run_finishes(tmp_path) -> None:
    """A section that fails for real (its corpus folder cannot be created: a file stands where it goes) is
    retried once, then skipped with the reason in the results and the report; the sections after it run."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "band_1000_s0_256-4096").write_text("a file where the filesize corpus folder must go")
    out = tmp_path / "docs" / "benchmarks.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "run", "--quick", "--peers", "none",
                           "--sections", "filesize,gpu", "--retry-pause", "0.1", "--out", str(out),
                           "--data", str(data), "--work", str(tmp_path / "work")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / "docs" / "benchmarks.json").read_text(encoding="utf-8"))
    failed = res["failed_sections"]
    assert set(failed) == {"filesize"}
    assert failed["filesize"]["attempts"] == 2
    assert "band_1000_s0_256-4096" in failed["filesize"]["reason"], failed
    assert "filesize" not in res  # no half section in the results
    gpu = res["gpu"]  # the section after the failing one ran: the CPU smoke loop of the GPU feed benchmark
    assert gpu["skipped"] is None and gpu["cuda"] in (True, False)
    assert {(r["store"], r["workers"]) for r in gpu["rows"]} == {(s, w) for s in ("raw", "packed") for w in (0, 1)}
    assert all(r["steps_per_s"] > 0 and 0 <= r["host_wait_fraction"] < 1 for r in gpu["rows"])
    text = out.read_text(encoding="utf-8")
    assert "## Sections not measured in this run" in text and "- **filesize**:" in text
    assert "## GPU feed: training from the loader" in text
    assert "section filesize failed" in proc.stderr and "retrying" in proc.stderr
