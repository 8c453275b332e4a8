"""The probe registry (``benchmarks/registry.py``): every module in ``benchmarks/probes/`` meets the contract,
``python -m benchmarks probe --list`` lists them all, and a probe's output follows the one JSON schema.

No timing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import registry  # noqa: E402

PROBES = sorted(p.stem for p in (ROOT / "benchmarks" / "probes").glob("*.py") if not p.stem.startswith("_"))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_discovery_finds_every_probe_file() -> None:
    assert "cold_store" in PROBES
    assert registry.discover() == PROBES


@pytest.mark.parametrize("name", PROBES)
def test_every_probe_meets_the_contract(name: str) -> None:
    module = registry.load(name)
    assert module.NAME == name
    assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION.strip() and "\n" not in module.DESCRIPTION
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    defaults = parser.parse_args([])  # every option has a default: the probe runs with no arguments
    assert isinstance(defaults, argparse.Namespace)
    assert callable(module.run) and module.run.__doc__


def test_probe_list_lists_every_probe() -> None:
    proc = _cli("probe", "--list")
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == PROBES


def test_unknown_probe_is_refused_with_the_names() -> None:
    proc = _cli("probe", "no_such_probe")
    assert proc.returncode == 2
    assert "got 'no_such_probe'" in proc.stderr and "cold_store" in proc.stderr


def test_a_probe_breaking_the_contract_is_named(tmp_path, monkeypatch) -> None:
    from benchmarks import probes

    (tmp_path / "broken_probe.py").write_text('NAME = "broken_probe"\n', encoding="utf-8")
    monkeypatch.setattr(probes, "__path__", [*probes.__path__, str(tmp_path)])
    with pytest.raises(ValueError, match=r"broken_probe.*DESCRIPTION is not a str.*add_arguments\(\) is missing"):
        registry.load("broken_probe")
    sys.modules.pop("benchmarks.probes.broken_probe", None)


def test_a_probe_writes_the_schema(tmp_path) -> None:
    out = tmp_path / "doc.json"
    proc = _cli("probe", "stat_files", "--files", "200", "--repeat", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text(encoding="utf-8"))
    registry.validate(doc)
    assert set(doc) == set(registry.SCHEMA_KEYS)
    assert doc["probe"] == "stat_files" and doc["version"] == registry.SCHEMA_VERSION
    assert doc["args"]["files"] == 200 and doc["machine"]["cores"] >= 1
    assert doc["results"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("machine"), "key 'machine' must be dict"),
    (lambda d: d.update(version=2), "version must be 1, got 2"),
    (lambda d: d.update(results=[1]), "key 'results' must be dict"),
    (lambda d: d.update(extra=1), r"unknown keys \['extra'\]"),
    (lambda d: d.update(probe="nope"), "unknown probe 'nope'"),
    (lambda d: d.update(duration_s=True), "key 'duration_s' must be float"),
])
def test_schema_violations_are_named(change, message) -> None:
    doc = {"probe": "cold_store", "version": 1, "args": {}, "machine": {}, "started": "2026-11-26T00:00:00Z",
           "duration_s": 1.0, "results": {}}
    registry.validate(doc)
    change(doc)
    with pytest.raises(ValueError, match=message):
        registry.validate(doc)
