"""The command line for a first user: help and defaults, --version, examples, plain-language errors,
progress bars in a real pseudo-terminal, the summary line, --quiet, and sql --format."""

from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

import consumer
from consumer.cli.main import build_parser, main

ROOT = str(Path(__file__).resolve().parents[2])
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_option_of_every_subcommand_has_help_showing_its_default():
    subs = _subparsers(build_parser())
    assert set(subs) == {"demo", "index", "info", "sql", "pack", "inspect", "verify", "merge", "cache", "report"}
    for name, sub in subs.items():
        rendered = _flat(sub.format_help())
        formatter = sub._get_formatter()
        options = [a for a in sub._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
        assert options, name
        for action in options:
            assert action.help, f"{name} {action.option_strings}: no help text"
            expanded = formatter._expand_help(action)
            assert "(default:" in expanded, f"{name} {action.option_strings}: {expanded!r} shows no default"
            assert _flat(expanded) in rendered
        for action in sub._actions:
            if not action.option_strings:
                assert action.help, f"{name} {action.dest}: positional without help"


def test_dataset_options_show_their_values(capsys):
    with pytest.raises(SystemExit) as e:
        main(["info", "--help"])
    assert e.value.code == 0
    out = _flat(capsys.readouterr().out)
    for shown in ("windows (default: diff)", "bytes per token (default: 2)", "auto:p95) (default: auto)",
                  "or none (default: file)", "(default: truncate)", "MIME types shown (default: 10)"):
        assert shown in out


@pytest.mark.parametrize("command", ["demo", "index", "info", "sql", "pack", "inspect", "cache", "report"])
def test_every_subcommand_help_ends_with_an_example(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    example = out.split("example:\n", 1)[1].splitlines()
    assert example[0].startswith(f"  consumer {command} ") and example[1].strip()  # the command, then what it does


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith(f"consumer {consumer.__version__} (Python ")
    res = subprocess.run([sys.executable, "-m", "consumer", "--version"], capture_output=True, text=True, env=ENV,
                         timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.split()[:2] == ["consumer", consumer.__version__]


@pytest.mark.parametrize("argv, message", [
    (["info", "{missing}"], "consumer: error: DIR: directory not found: {missing}"),
    (["sql", "{missing}", "SELECT 1"], "consumer: error: DIR: directory not found: {missing}"),
    (["pack", "{missing}", "{tmp}/out"], "consumer: error: DIR: directory not found: {missing}"),
    (["index", "{afile}"], "consumer: error: DIR: not a directory: {afile} (give a folder of files or of class "
                           "folders)"),
    (["demo", "--dir", "{missing}"], "consumer: error: --dir: directory not found: {missing}"),
])
def test_missing_directory_says_not_found(tmp_path, capsys, argv, message):
    afile = tmp_path / "afile"
    afile.write_text("x")
    fmt = {"missing": tmp_path / "no" / "such", "afile": afile, "tmp": tmp_path}
    assert main([a.format(**fmt) for a in argv] + (["--cache-dir", "off"] if argv[0] != "demo" else [])) == 2
    err = capsys.readouterr().err
    assert err == message.format(**fmt) + "\n"


@pytest.mark.parametrize("argv, message", [
    (["--seqlen", "abc"], "argument --seqlen: expected a positive integer, 'auto' or 'auto:pNN' (e.g. auto:p95), "
                          "got 'abc'"),
    (["--seqlen", "0"], "argument --seqlen: expected a positive integer, 'auto' or 'auto:pNN' (e.g. auto:p95), "
                        "got '0'"),
    (["--seqlen", "auto:p0"], "argument --seqlen: expected a positive integer"),
    (["--seqlen", "auto:95"], "got 'auto:95'"),
    (["--n-bytes", "4"], "argument --n-bytes: invalid choice: 4"),
    (["--top", "0"], "argument --top: expected an integer >= 1, got '0'"),
    (["--top", "ten"], "argument --top: expected an integer >= 1, got 'ten'"),
    (["--style", "stack"], "argument --style: invalid choice: 'stack'"),
])
def test_bad_option_values_name_the_option(corpus_dir, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        main(["info", corpus_dir, *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "consumer info: error:" in err


@pytest.mark.parametrize("text, value", [("7", 7), ("auto", "auto"), ("auto:p95", "auto:p95"),
                                         ("auto:p99.5", "auto:p99.5"), ("auto:p100", "auto:p100")])
def test_seqlen_option_accepts_every_form(text, value):
    args = build_parser().parse_args(["info", "d", "--seqlen", text])
    assert args.seqlen == value


def _run_in_pty(argv: list[str], cwd: str) -> tuple[int, str, str]:
    """Run ``python -m consumer ARGV`` with stderr on a pseudo-terminal (100 columns) and stdout on a pipe;
    returns (exit code, stdout, everything written to the terminal)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "consumer", *argv], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, env=ENV, cwd=cwd)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end of the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=120), out, b"".join(chunks).decode("utf-8", errors="replace")


def test_progress_bar_on_a_terminal_for_a_cold_info_and_summary(corpus_dir, tmp_path):
    code, out, term = _run_in_pty(["info", corpus_dir, "--cache-dir", str(tmp_path / "cache")], str(tmp_path))
    assert code == 0, term
    assert "top file types" in out and "libmagic" not in out  # the bar never goes to stdout
    assert "libmagic: 100%" in term and "17/17" in term  # tqdm's bar over the 17 files, completed
    summary = [line for line in term.replace("\r", "").splitlines() if line.startswith("consumer: 17 files, ")]
    assert len(summary) == 1 and "index cache miss" in summary[0] and "libmagic calls 17" in summary[0]
    # a warm cache: no libmagic, so no bar; the summary says hit
    code, out, term = _run_in_pty(["info", corpus_dir, "--cache-dir", str(tmp_path / "cache")], str(tmp_path))
    assert code == 0 and "%|" not in term
    assert "index cache hit, libmagic calls 0" in term


@pytest.mark.parametrize("command", [["info"], ["sql", "SELECT count(*) FROM files"], ["pack", "OUT"]])
def test_quiet_is_silent_on_a_terminal(corpus_dir, tmp_path, command):
    argv = [command[0], corpus_dir, *[str(tmp_path / "p") if a == "OUT" else a for a in command[1:]]]
    code, out, term = _run_in_pty([*argv, "--cache-dir", str(tmp_path / "cache"), "--quiet", "--seqlen", "64"],
                                  str(tmp_path))
    assert code == 0 and out.strip()
    assert term == ""


def test_no_bar_when_stderr_is_not_a_terminal_unless_verbose(corpus_dir, tmp_path):
    res = subprocess.run([sys.executable, "-m", "consumer", "sql", corpus_dir, "SELECT count(*) FROM files",
                          "--seqlen", "64", "--cache-dir", str(tmp_path / "c1")], capture_output=True, text=True,
                         env=ENV, timeout=120, check=False)
    assert res.returncode == 0 and res.stdout.splitlines()[-1].strip() == "17"
    assert "%|" not in res.stderr and res.stderr.startswith("consumer: 17 files, ")
    assert res.stderr.count("\n") == 1
    res = subprocess.run([sys.executable, "-m", "consumer", "pack", corpus_dir, str(tmp_path / "p"), "--verbose",
                          "--cache-dir", str(tmp_path / "c2")], capture_output=True, text=True, env=ENV,
                         timeout=120, check=False)
    assert res.returncode == 0 and "libmagic: 100%" in res.stderr and "pack p (megatron" in res.stderr
    assert any(line.startswith("consumer: 17 files, ") for line in res.stderr.splitlines())


def test_index_prints_the_summary_on_stdout(corpus_dir, tmp_path, capsys):
    assert main(["index", corpus_dir, "--cache-dir", str(tmp_path / "c"), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("17 files, ") and "index cache miss, libmagic calls 17" in out[1]
    assert out[2].startswith("cache key ") and len(out[2].split()[-1]) == 64


QUERY = "SELECT class, count(*) AS n, sum(size) AS bytes, x'00ff' AS blob, NULL AS empty FROM files GROUP BY class"


def test_sql_formats(corpus_dir, tmp_path, capsys):
    base = ["sql", corpus_dir, QUERY, "--cache-dir", str(tmp_path / "c"), "--quiet"]
    assert main([*base, "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["class", "n", "bytes", "blob", "empty"]
    assert rows[1][:2] == ["cat", "9"] and rows[1][3:] == ["00ff", ""] and len(rows) == 4
    assert main([*base, "--format", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json[0]["class"] == "cat" and as_json[0]["n"] == 9 and as_json[0]["blob"] == "00ff"
    assert as_json[0]["empty"] is None and int(rows[1][2]) == as_json[0]["bytes"]
    assert main([*base, "--json"]) == 0  # the old flag is an alias
    assert json.loads(capsys.readouterr().out) == as_json
    assert main([*base]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["class", "n", "bytes", "blob", "empty"] and set(table[1]) <= {"-", " "}
    assert table[2].split()[:2] == ["cat", "9"] and table[2].split()[-1] == "NULL"


def test_summary_goes_to_stderr_after_the_output(corpus_dir, tmp_path, capsys):
    assert main(["sql", corpus_dir, "SELECT count(*) AS n FROM files", "--format", "csv", "--seqlen", "64",
                 "--cache-dir", str(tmp_path / "c")]) == 0
    cap = capsys.readouterr()
    assert cap.out == "n\n17\n"
    assert cap.err.startswith("consumer: 17 files, ") and "index cache miss" in cap.err and cap.err.endswith(" s\n")
    assert cap.err.count("\n") == 1


def test_library_warnings_are_one_line_and_only_on_success(corpus_dir, tmp_path, capsys):
    assert main(["demo", "--dir", corpus_dir, "--seqlen", "auto"]) == 0  # diff style, seqlen auto: mostly PAD
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("consumer: warning: seqlen='auto' resolved to ")
    assert "long_files='windows'" in err[0]
    assert main(["demo", "--dir", corpus_dir, "--seqlen", "auto:p50"]) == 0
    assert capsys.readouterr().err == ""  # a percentile is a deliberate choice: no warning
    assert main(["sql", corpus_dir, "DELETE FROM files", "--cache-dir", "off"]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # an error is the only line


def test_info_reports_the_padding_share(corpus_dir, capsys):
    from consumer import Consumer
    from consumer.tokens.index import padding_share

    assert main(["info", corpus_dir, "--cache-dir", "off", "--quiet", "--seqlen", "32"]) == 0
    out = capsys.readouterr().out
    ds = Consumer(corpus_dir, seqlen=32, cache_dir=False)
    share = padding_share(ds.index)
    assert 0 < share < 1
    assert f"rows: {len(ds)} samples of 32 tokens, {share:.0%} of all row tokens are PAD" in out


def test_sql_stops_a_runaway_statement_at_its_timeout(tmp_path, capsys):
    from ..conftest import write_corpus
    root = tmp_path / "c"
    write_corpus(root, {"cat": [10, 20]})
    runaway = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    assert main(["sql", str(root), runaway, "--timeout", "0.5", "--cache-dir", "off", "--quiet"]) == 2
    assert "statement stopped after the timeout of 0.5 s" in capsys.readouterr().err
