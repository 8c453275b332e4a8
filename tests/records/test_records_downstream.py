"""A records dataset downstream, each once: to_dict/from_dict, the DataLoader (worker processes), the command line
(index, sql, pack with --documents; index --raw-index)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from consumer import Consumer
from consumer.errors import FileChangedError
from consumer.formats import read_raw_index

from .writers import write_jsonl


@pytest.fixture
def shards(tmp_path):
    root = tmp_path / "corpus"
    (root / "x").mkdir(parents=True)
    (root / "y").mkdir()
    (root / "x" / "README").write_text("not a container: a folder's other files are ignored")
    a = write_jsonl(root / "x" / "a.jsonl", [f"text {i} " * (i % 5) for i in range(30)], extra={"label": "p"})
    b = write_jsonl(root / "y" / "b.jsonl", [f"other {i}" for i in range(12)], extra={"label": "q"})
    return root, a, b


def test_a_folder_holds_containers_of_the_kind(shards):
    tmp, a, b = shards
    ds = Consumer(str(tmp), documents="jsonl", cache_dir=False)
    assert ds.build_info["records"]["ignored_files"] == 1 and ds.classes == ["x", "y"]


@pytest.mark.parametrize("class_field", [None, "label"])
def test_to_dict_from_dict_rebuilds_the_same_dataset(shards, class_field):
    tmp, a, b = shards
    ds = Consumer(str(tmp), documents="jsonl", class_field=class_field, cache_dir=tmp.parent / "c", seqlen=16)
    d = json.loads(ds.to_json(include_files=True))
    assert d["documents"] == "jsonl" and d["class_field"] == class_field
    assert [c[0] for c in d["containers"]] == [str(a), str(b)]
    again = Consumer.from_dict(d, cache_dir=tmp.parent / "c")
    assert again.classes == ds.classes and list(again.files) == list(ds.files)
    ids = np.arange(len(ds))
    assert np.array_equal(again.fetch_numpy(ids)["input_array"], ds.fetch_numpy(ids)["input_array"])
    a.write_text(a.read_text() + '{"text": "new", "label": "p"}\n')
    os.utime(a, ns=(1, 4_000_000_000_000))
    with pytest.raises(FileChangedError):
        Consumer.from_dict(d, cache_dir=tmp.parent / "c")


def test_dataloader_with_workers(shards):
    tmp, _, _ = shards
    ds = Consumer(str(tmp), documents="jsonl", cache_dir=tmp.parent / "c", seqlen=16)
    loader = ds.dataloader(8, query="supervised", num_workers=2, shuffle=False)
    seen = torch.cat([batch["input_array"] for batch in loader])
    assert seen.shape[0] >= len(ds)
    assert torch.equal(seen[:len(ds)], ds.fetch(np.arange(len(ds)), "supervised")["input_array"])


def _cli(*args: str, cwd) -> str:
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "consumer", *args], capture_output=True, text=True, cwd=cwd, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_command_line(shards):
    tmp, a, _ = shards
    cache = str(tmp.parent / f"{tmp.name}-cache")  # never inside the corpus folder
    out = _cli("index", "--documents", "jsonl", "--class-field", "label", "--cache-dir", cache,
               str(tmp / "*" / "*.jsonl"), cwd=tmp)
    assert "documents='jsonl', classes=['p', 'q'], records=42" in out and "42 documents in 2 containers" in out
    out = _cli("sql", "--documents", "jsonl", "--cache-dir", cache, str(tmp),
               "SELECT count(*) AS n FROM documents WHERE json_extract_string(json, '$.label') = 'q'", cwd=tmp)
    assert "12" in out.split("\n")[2]
    _cli("pack", "--documents", "jsonl", "--cache-dir", cache, str(tmp), str(tmp.parent / "packed"), cwd=tmp)
    assert Consumer.from_packed(tmp.parent / "packed").documents.doc_size.size == 42
    out = _cli("index", "--raw-index", str(a), cwd=tmp)
    assert "(30 entries)" in out
    entries = read_raw_index(a.with_suffix(".idx"))
    data = a.read_bytes()
    assert all(data[o:o + n].startswith(b"{") for o, n in entries.tolist())


def test_info_counts_documents_and_types_each_documents_bytes(tmp_path, capsys):
    from consumer.cli.main import main

    shard = tmp_path / "a.jsonl"
    shard.write_text("".join(f'{{"text": "same words", "label": "{"xy"[i % 2]}"}}\n' for i in range(20))
                     + '{"text": "%PDF-1.4 not quite", "label": "x"}\n', encoding="utf-8")
    assert main(["info", "--documents", "jsonl", "--class-field", "label", "--cache-dir", "off", str(shard)]) == 0
    out, err = capsys.readouterr()
    assert "documents='jsonl', classes=['x', 'y'], records=21" in out
    assert "class  id  documents  bytes" in out and "\ndocument sizes\n" in out
    mimes = out.split("top MIME types\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert [line.split()[:2] for line in mimes] == [["text/plain", "20"], ["application/pdf", "1"]]
    dup = [line for line in out.splitlines() if line.startswith("  ") and "#" in line]
    assert len(dup) == 1 and dup[0].count(f"{shard}#") == 6 and dup[0].endswith(", ... and 14 more")
    assert f"{shard}#0 [x], {shard}#2 [x]" in dup[0]  # record order, not path order (#10 after #9)
    assert "consumer: 21 documents in 1 container," in err
