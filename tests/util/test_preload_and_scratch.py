"""Two helpers of the parallel records build: :class:`~consumer.util.preload.Preload` (modules imported on a thread
while a scan runs, joined before the caller goes on) and :class:`~consumer.util.buffers.Scratch` made with the size
of the largest piece (each named buffer made once)."""

from __future__ import annotations

import sys
import threading

import pytest

from consumer.util.buffers import Scratch
from consumer.util.preload import Preload


def _module(tmp_path, monkeypatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_preload_imports_on_a_thread_and_leaves_no_thread_behind(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "preloaded_ok", "import threading\nWHERE = threading.current_thread().name\n")
    with Preload([name]):
        pass
    assert sys.modules[name].WHERE == "consumer-preload"  # imported by the preload's thread, not this one
    assert not [t for t in threading.enumerate() if t.name == "consumer-preload"]


def test_a_failing_preload_is_silent_and_the_callers_import_raises_it(tmp_path, monkeypatch):
    name = _module(tmp_path, monkeypatch, "preloaded_bad", "raise RuntimeError('broken on purpose')\n")
    with Preload([name, "json"]):
        pass
    assert name not in sys.modules  # a failed import is not kept
    with pytest.raises(RuntimeError, match="broken on purpose"):
        __import__(name)


def test_preload_of_modules_already_imported_starts_no_thread():
    before = threading.active_count()
    preload = Preload(["json", "os"])
    assert threading.active_count() == before
    preload.join()


def test_scratch_makes_each_buffer_once_at_the_largest_size():
    scratch = Scratch(at_least=1000)
    first = scratch.get("work", 600)
    assert first.size == 600 and first.base.size == 1000  # a slice of a buffer of the largest size
    again = scratch.get("work", 1000)  # a larger file after a smaller one: the same buffer, not a new one
    assert again.size == 1000 and again.base is first.base
    grown = scratch.get("work", 1001)  # beyond it: a new buffer, grown by half at least
    assert grown.size == 1001 and grown.base is not first.base and grown.base.size == 1500
    assert Scratch().get("x", 7).base.size == 7  # without a size: each buffer as large as first asked


def test_scratch_refuses_a_negative_size():
    with pytest.raises(ValueError, match=r"at_least: expected a byte count >= 0, got -1"):
        Scratch(at_least=-1)
