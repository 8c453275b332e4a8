"""The command line: index, info, sql, cache; exit codes and one-line errors."""

import json
import os
import subprocess
import sys

import pytest

from consumer.cli.main import main


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "cache")


def test_index_then_hit(corpus_dir, cache, capsys):
    assert main(["index", corpus_dir, "--cache-dir", cache, "--quiet"]) == 0
    assert "index cache miss" in capsys.readouterr().out
    assert main(["index", corpus_dir, "--cache-dir", cache]) == 0
    out = capsys.readouterr()
    assert "index cache hit" in out.out and "libmagic calls 0" in out.out


def test_info_table(corpus_dir, cache, capsys):
    assert main(["info", corpus_dir, "--cache-dir", cache, "--style", "concat", "--seqlen", "32"]) == 0
    out = capsys.readouterr().out
    for word in ("class", "cat", "dog", "eel", "(all)", "top file types", "ASCII text", "file sizes", "median"):
        assert word in out


def test_sql_table_and_json(corpus_dir, cache, capsys):
    assert main(["sql", corpus_dir, "SELECT class, count(*) AS n FROM files GROUP BY class", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["class", "n"] and out[2].split() == ["cat", "9"]
    assert main(["sql", corpus_dir, "SELECT class, count(*) AS n FROM files GROUP BY class", "--json",
                 "--cache-dir", cache]) == 0
    assert json.loads(capsys.readouterr().out) == [{"class": "cat", "n": 9}, {"class": "dog", "n": 6},
                                                   {"class": "eel", "n": 2}]


@pytest.mark.parametrize("argv, message", [
    (["sql", "{dir}", "DELETE FROM files"], "DELETE FROM files"),
    (["sql", "{dir}", "SELECT x FROM nowhere"], "no such table: nowhere"),
    (["info", "/definitely/not/here"], "DIR: directory not found: /definitely/not/here"),
    (["index", "{dir}", "--cache-dir", "{file}"], "cache_dir must be a directory"),
])
def test_bad_input_is_one_line_and_exit_2(corpus_dir, cache, tmp_path, capsys, argv, message):
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv = [a.format(dir=corpus_dir, file=afile) for a in argv]
    if "--cache-dir" not in argv:
        argv += ["--cache-dir", cache]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("consumer: error:") and message in err and err.count("\n") == 1


def test_cache_list_and_clear(corpus_dir, cache, capsys):
    main(["index", corpus_dir, "--cache-dir", cache, "--quiet"])
    capsys.readouterr()
    assert main(["cache", "list", "--cache-dir", cache]) == 0
    listing = capsys.readouterr().out
    assert "diff" in listing and "catalog:" in listing
    assert main(["cache", "clear", "--cache-dir", cache, "--catalog"]) == 0
    assert "cleared" in capsys.readouterr().out
    assert not os.path.exists(os.path.join(cache, "catalog.sqlite"))


def test_console_entry_points(corpus_dir, cache):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    res = subprocess.run([sys.executable, "-m", "consumer", "sql", corpus_dir, "SELECT count(*) FROM files",
                          "--cache-dir", cache], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0 and res.stdout.splitlines()[-1].strip() == "17"
    res = subprocess.run([sys.executable, "-m", "consumer", "bogus"], capture_output=True, text=True, env=env)
    assert res.returncode == 2


def test_pack_and_inspect(corpus_dir, cache, tmp_path, capsys):
    prefix = tmp_path / "out" / "corpus"  # the directory is created
    assert main(["pack", corpus_dir, str(prefix), "--cache-dir", cache, "--n-bytes", "1"]) == 0
    out = capsys.readouterr().out
    assert "packed 17 documents" in out and str(prefix) + ".bin" in out and "uint16" in out
    assert main(["inspect", str(prefix)]) == 0
    out = capsys.readouterr().out
    assert "megatron store, uint16 tokens, n_bytes=1" in out and "17 documents" in out and "<SEP>" in out
    assert main(["inspect", str(prefix), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"] == 17 and info["classes"] == {"cat": 9, "dog": 6, "eel": 2}
    assert main(["pack", corpus_dir, str(tmp_path / "m"), "--format", "modalities", "--cache-dir", cache]) == 0
    assert ".pbin" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "missing")]) == 2
    assert "no packed store" in capsys.readouterr().err
