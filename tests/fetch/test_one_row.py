"""The one-row plan (``consumer.fetch.one_row``) behind ``ds[i]`` / ``ds.fetch([i])`` against the general path: the
same rows and the same errors, other queries (MLM masks) untouched, and a store changed in place after the plan was
armed served as the general path serves it (bad ids refused)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, InputError
from consumer.fetch.reader import read_rows

from ..conftest import without_chunk_sums, write_corpus

SIZES = {"cat": [0, 1, 5, 100, 301, 2500], "dog": [6, 31, 64, 999], "eel": [250, 11, 4000]}
FORMS = ["ds[i]", "ds[[i]]", "ds.fetch(i)", "ds.fetch([i])", "ds.fetch(array)"]


def _call(ds: Consumer, form: str, i: int, general: bool = False) -> dict:
    """One row through ``form``; ``general``: the same call through a route the plan never takes (the result the
    general path gives)."""
    if form.startswith("ds["):
        key = i if form == "ds[i]" else [i]
        return ds[key, None] if general else ds[key]
    key = {"ds.fetch(i)": i, "ds.fetch([i])": [i], "ds.fetch(array)": np.array([i], dtype=np.int64)}[form]
    if general:
        from consumer.fetch.select import as_sample_ids
        return {k: v for k, v in ds.fetch_numpy(as_sample_ids(key, len(ds)), None).items()}
    return ds.fetch(key)


def _outcome(fn, *args, **kwargs) -> tuple:
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the class and message are what is compared)
        return ("error", type(e).__name__, str(e))
    return ("ok", {k: np.asarray(v) for k, v in out.items()})


def _same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1:] == b[1:]
    else:
        assert a[1].keys() == b[1].keys()
        for k in a[1]:
            assert a[1][k].dtype == b[1][k].dtype
            np.testing.assert_array_equal(a[1][k], b[1][k])


@pytest.fixture(scope="module", params=["sums", "no-sums"])
def store(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("one-row")
    fps = write_corpus(root / "data", SIZES)
    prefix = root / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=48, n_bytes=2, metadata=None).pack(prefix)
    if request.param == "no-sums":
        without_chunk_sums(prefix)
    return prefix


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_one_row_calls_give_the_general_paths_rows_and_errors(store, data):
    ds = Consumer.from_packed(store, style="concat", seqlen=48)
    n = len(ds)
    ds[0]  # a general fetch of one row arms the plan
    assert ds._fetcher.one_row.armed
    calls = data.draw(st.lists(st.tuples(st.sampled_from(FORMS), st.integers(-n - 2, n + 2)), min_size=1,
                               max_size=20))
    for form, i in calls:
        _same(_outcome(_call, ds, form, i), _outcome(_call, ds, form, i, general=True))
        if 0 <= i < n:
            ref = read_rows(ds.index, ds.documents, np.array([i]))[0]  # the general reader, no runs
            np.testing.assert_array_equal(_call(ds, form, i)["input_array"].numpy(), ref)


def test_other_queries_and_dtypes_keep_the_general_path(store):
    ds = Consumer.from_packed(store, style="concat", seqlen=48)
    ds[1]
    assert ds._fetcher.one_row.armed
    got32 = ds.fetch([3], out_dtype=np.int32)["input_array"]
    assert got32.dtype.is_signed and str(got32.dtype) == "torch.int32"
    ds.set_mlm_mode(mask_frequency=0.3)
    mlm = ds[5]
    assert set(mlm) == {"input_array", "attention_mask", "labels"}
    _same(_outcome(lambda: ds[5]), _outcome(lambda: ds[5, "mlm"]))
    _same(_outcome(lambda: ds.fetch([5], "mlm")), _outcome(lambda: ds[5, "mlm"]))
    plain = read_rows(ds.index, ds.documents, np.array([5]))[0]
    assert not np.array_equal(mlm["input_array"].numpy(), plain)  # masked at 30%: not the plain row
    ds.set_mlm_mode(add_cls=True)
    ds.mode = None  # the default query with a CLS prefix: not the plan's row
    _same(_outcome(lambda: ds[5]), _outcome(lambda: ds[5, None]))
    row = ds[5]["input_array"]
    assert row.shape == (1, 49) and int(row[0, 0]) == ds.vocab.cls


def _write_token(prefix, position: int, value: int) -> None:
    """Write ``value`` over token ``position`` of the store's int32 tokens, in place."""
    with open(f"{prefix}.bin", "r+b") as f:
        f.seek(4 * position)
        f.write(int(value).to_bytes(4, "little", signed=True))


@pytest.mark.parametrize("value", [70000, -3, 65])
def test_a_store_changed_in_place_is_served_as_the_general_path_serves_it(tmp_path, value):
    fps = write_corpus(tmp_path / "data", SIZES)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=48, n_bytes=2, metadata=None).pack(prefix)
    fast = Consumer.from_packed(prefix, style="concat", seqlen=48)
    ref = Consumer.from_packed(prefix, style="concat", seqlen=48)
    n = len(fast)
    for i in range(n):  # warm both: every chunk verified, the plan armed
        fast[i], ref[i, None]
    assert fast._fetcher.one_row.armed
    start = fast._fetcher._rows.packed.start
    target = n // 2
    time.sleep(0.05)  # a later change stamp than the packing's
    _write_token(prefix, int(start[target]) + 3, value)
    for i in [target, 0, n - 1, target]:
        _same(_outcome(fast.__getitem__, i), _outcome(ref.__getitem__, (i, None)))
        _same(_outcome(fast.fetch, [i]), _outcome(ref.__getitem__, (i, None)))
    got = _outcome(fast.__getitem__, target)
    if value in (70000, -3):
        assert got[:2] == ("error", "FormatError") and f"sample {target}" in got[2]
    else:
        assert got[0] == "ok" and int(got[1]["input_array"][0, 3]) == 65
    assert fast._fetcher.one_row.armed == (value == 65)  # re-armed by the general path only on a clean store


def test_a_budget_set_after_the_plan_was_armed_is_applied(store, monkeypatch):
    ds = Consumer.from_packed(store, style="concat", seqlen=48)
    ds[2]
    assert ds._fetcher.one_row.armed
    monkeypatch.setenv("CONSUMER_MAX_BATCH_BYTES", "100")  # under one row of 48 tokens
    with pytest.raises(InputError, match="over the fetch budget of 100 bytes"):
        ds[2]
    with pytest.raises(InputError, match="over the fetch budget of 100 bytes"):
        ds.fetch([2])
    monkeypatch.delenv("CONSUMER_MAX_BATCH_BYTES")
    np.testing.assert_array_equal(ds[2]["input_array"].numpy(), read_rows(ds.index, ds.documents, np.array([2]))[0])
