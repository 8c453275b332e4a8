"""The one-row plan (``consumer.fetch.one_row``) behind ``ds[i]`` / ``ds.fetch([i])`` / ``ds.fetch_numpy(array)``
against the general path: the same rows (type, dtype, shape, strides) and the same errors, other queries (MLM masks)
untouched, and a store changed in place or replaced after the plan was armed served as the general path serves it
(bad ids refused), whether the change is seen by the ``struct stat`` snapshot or by ``os.fstat``."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer import Consumer, FormatError, InputError
from consumer.fetch.reader import read_rows
from consumer.sources.stat_snapshot import StatSnapshot

from ..conftest import without_chunk_sums, write_corpus

SIZES = {"cat": [0, 1, 5, 100, 301, 2500], "dog": [6, 31, 64, 999], "eel": [250, 11, 4000]}
FORMS = ["ds[i]", "ds[[i]]", "ds.fetch(i)", "ds.fetch([i])", "ds.fetch(array)", "ds.fetch_numpy(array)"]


def _call(ds: Consumer, form: str, i: int, general: bool = False) -> dict:
    """One row through ``form``; ``general``: the same call with the plan disarmed first, so that the general path
    answers it (and arms the plan again if the store is clean)."""
    if general:
        ds._fetcher.one_row.limit = 0
        assert not ds._fetcher.one_row.armed
    if form.startswith("ds["):
        return ds[i if form == "ds[i]" else [i]]
    key = {"ds.fetch(i)": i, "ds.fetch([i])": [i]}.get(form, np.array([i], dtype=np.int64))
    return ds.fetch_numpy(key) if form == "ds.fetch_numpy(array)" else ds.fetch(key)


def _outcome(fn, *args, **kwargs) -> tuple:
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001  (the class and message are what is compared)
        return ("error", type(e).__name__, str(e))
    return ("ok", {k: np.asarray(v) for k, v in out.items()}, {k: _form(v) for k, v in out.items()})


def _form(v) -> tuple:
    """What a caller sees of a column besides its values: its type, dtype, shape, strides, contiguity."""
    if isinstance(v, np.ndarray):
        return type(v), v.dtype, v.shape, v.strides, v.flags.c_contiguous, v.flags.writeable, v.base is None
    return type(v), v.dtype, tuple(v.shape), v.stride(), v.is_contiguous()


def _same(a: tuple, b: tuple) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1:] == b[1:]
    else:
        assert a[1].keys() == b[1].keys()
        assert a[2] == b[2]
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
    plan = ds._fetcher.one_row
    for form, i in calls:
        if not plan.armed:
            ds[0]  # armed again by a general fetch of one row (a general call that raised did not arm it)
        assert plan.armed
        key = np.array([i]) if form == "ds.fetch_numpy(array)" else i
        assert (plan.row(key, None, ds._mask, np.int64, form != "ds.fetch_numpy(array)") is not None) == (0 <= i < n)
        _same(_outcome(_call, ds, form, i), _outcome(_call, ds, form, i, general=True))
        if 0 <= i < n:
            ref = read_rows(ds.index, ds.documents, np.array([i]))[0]  # the general reader, no runs
            np.testing.assert_array_equal(np.asarray(_call(ds, form, i)["input_array"]), ref)


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


def _general(ds: Consumer, key: object) -> dict:
    """``ds[key]`` answered by the general path (the plan disarmed first; the call arms it again if it may)."""
    ds._fetcher.one_row.limit = 0
    return ds[key]


def _general_numpy(ds: Consumer, i: int) -> dict:
    """``ds.fetch_numpy(np.array([i]))`` answered by the general path."""
    ds._fetcher.one_row.limit = 0
    return ds.fetch_numpy(np.array([i]))


def _warm_pair(tmp_path, look: str, monkeypatch) -> tuple:
    """A store and two datasets over it, every chunk verified and the plan armed in both; ``look``: how the plan
    looks at the data file per call (its ``struct stat`` snapshot, or ``os.fstat`` where no snapshot is taken)."""
    if look == "os.fstat":
        monkeypatch.setattr(StatSnapshot, "take", lambda self: None)
    fps = write_corpus(tmp_path / "data", SIZES)
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=48, n_bytes=2, metadata=None).pack(prefix)
    fast = Consumer.from_packed(prefix, style="concat", seqlen=48)
    ref = Consumer.from_packed(prefix, style="concat", seqlen=48)
    for i in range(len(fast)):
        fast[i], ref[i]
    plan = fast._fetcher.one_row
    assert plan.armed and (plan.snapshot is None) == (look == "os.fstat")
    if look == "snapshot" and plan.snapshot is None:
        pytest.skip("libc's fstat is not to be had through ctypes here (glibc < 2.33, not Linux/macOS)")
    return prefix, fast, ref


@pytest.mark.parametrize("look", ["snapshot", "os.fstat"])
@pytest.mark.parametrize("restore_mtime", [False, True])
@pytest.mark.parametrize("value", [70000, -3, 65])
def test_a_store_changed_in_place_is_served_as_the_general_path_serves_it(tmp_path, monkeypatch, value, look,
                                                                          restore_mtime):
    prefix, fast, ref = _warm_pair(tmp_path, look, monkeypatch)
    n = len(fast)
    start = fast._fetcher._rows.packed.start
    target = n // 2
    before = os.stat(f"{prefix}.bin")
    time.sleep(0.05)  # a later change stamp than the packing's
    _write_token(prefix, int(start[target]) + 3, value)
    if restore_mtime:  # same size, same mtime: only the ctime tells
        os.utime(f"{prefix}.bin", ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(f"{prefix}.bin").st_mtime_ns == before.st_mtime_ns
    for i in [target, 0, n - 1, target]:
        _same(_outcome(fast.__getitem__, i), _outcome(_general, ref, i))
        _same(_outcome(fast.fetch, [i]), _outcome(_general, ref, i))
        _same(_outcome(fast.fetch_numpy, np.array([i])), _outcome(_general_numpy, ref, i))
    got = _outcome(fast.__getitem__, target)
    if value in (70000, -3):
        assert got[:2] == ("error", "FormatError") and f"sample {target}" in got[2]
    else:
        assert got[0] == "ok" and int(got[1]["input_array"][0, 3]) == 65
    assert fast._fetcher.one_row.armed == (value == 65)  # re-armed by the general path only on a clean store


@pytest.mark.parametrize("look", ["snapshot", "os.fstat"])
def test_a_store_replaced_after_arming_is_served_as_the_general_path_serves_it(tmp_path, monkeypatch, look):
    """A damaged data file renamed over the store's: the open dataset reads the file it opened (its map and
    descriptor), on the plan's path as on the general one; a dataset opened afterwards refuses the new file."""
    prefix, fast, ref = _warm_pair(tmp_path, look, monkeypatch)
    n = len(fast)
    start = fast._fetcher._rows.packed.start
    target = n // 2
    rows = {i: np.asarray(fast[i]["input_array"]).copy() for i in [target, 0, n - 1]}
    data = bytearray(open(f"{prefix}.bin", "rb").read())
    at = 4 * (int(start[target]) + 3)
    data[at:at + 4] = (70000).to_bytes(4, "little")
    time.sleep(0.05)
    (tmp_path / "new.bin").write_bytes(bytes(data))
    os.replace(tmp_path / "new.bin", f"{prefix}.bin")
    for i in [target, 0, n - 1, target]:
        got = _outcome(fast.__getitem__, i)
        _same(got, _outcome(_general, ref, i))
        _same(_outcome(fast.fetch, np.array([i])), got)
        np.testing.assert_array_equal(got[1]["input_array"], rows[i])
    with pytest.raises(FormatError):
        Consumer.from_packed(prefix, style="concat", seqlen=48)[target]


def test_threads_each_see_a_change_made_after_arming(tmp_path, monkeypatch):
    """Rows fetched from several threads at once are the general path's; after a damaging write every thread's next
    call is refused (each thread fills its own ``struct stat`` buffer)."""
    from concurrent.futures import ThreadPoolExecutor

    prefix, fast, ref = _warm_pair(tmp_path, "snapshot", monkeypatch)
    n = len(fast)
    want = {i: np.asarray(_general(ref, i)["input_array"]) for i in range(n)}
    with ThreadPoolExecutor(4) as pool:
        for got in pool.map(lambda i: (i, np.asarray(fast[i % n]["input_array"])), range(8 * n)):
            np.testing.assert_array_equal(got[1], want[got[0] % n])
        assert fast._fetcher.one_row.armed
        target = n // 2
        time.sleep(0.05)
        _write_token(prefix, int(fast._fetcher._rows.packed.start[target]) + 3, 70000)
        outcomes = list(pool.map(lambda _: _outcome(fast.__getitem__, target), range(16)))
    assert all(o[:2] == ("error", "FormatError") and f"sample {target}" in o[2] for o in outcomes), outcomes


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


@pytest.mark.parametrize("form", [*FORMS, "batch of 3", "batch of 40"])
def test_a_damaged_chunk_not_yet_verified_is_refused_by_an_armed_plan(tmp_path, form):
    """The plan armed while some chunks are not verified yet looks the row's chunks up itself: a row in a damaged
    chunk raises the general path's FormatError naming the chunk (whatever the call), rows elsewhere are served, and
    a row in a chunk not yet verified is checked before it is served."""
    fps = write_corpus(tmp_path / "data", {"a": [20000] * 6})
    prefix = tmp_path / "store"
    Consumer(fps, cache_dir=False, style="concat", seqlen=48, n_bytes=2, metadata=None).pack(
        prefix, checksum_chunk_bytes=4096)
    clean = Consumer.from_packed(prefix, style="concat", seqlen=48).fetch_numpy(np.arange(1200))["input_array"]
    ds = Consumer.from_packed(prefix, style="concat", seqlen=48)
    _call(ds, "ds.fetch(array)", 0)
    _call(ds, "ds.fetch(array)", 1)  # armed by the general path, served by the plan
    verifier = ds.documents.source.tokens.verifier
    assert ds._fetcher.one_row.armed and verifier.verified == 1
    victim = 600  # tokens [28800, 28848): chunk 28 of 1024-token chunks (int32 tokens, 4 KiB chunks)
    with open(f"{prefix}.bin", "r+b") as f:
        f.seek(28810 * 4)
        word = f.read(1)
        f.seek(28810 * 4)
        f.write(bytes([word[0] ^ 1]))
    ds = Consumer.from_packed(prefix, style="concat", seqlen=48)  # opened after the change: its stamp is today's
    _call(ds, "ds.fetch(array)", 0)
    _call(ds, "ds.fetch(array)", 1)
    verifier = ds.documents.source.tokens.verifier
    assert ds._fetcher.one_row.armed and verifier.verified == 1
    assert np.array_equal(np.asarray(_call(ds, "ds.fetch(array)", 1100)["input_array"])[0], clean[1100])
    assert verifier.seen[1100 * 48 // 1024] and not verifier.seen[28]  # checked before it was served
    named = rf"^{prefix}: chunk 28 \(bytes {28 * 4096}\.\.{29 * 4096} of {prefix}\.bin\): crc32c expected"
    with pytest.raises(FormatError, match=named):
        if form.startswith("batch of "):
            ids = np.arange(victim - int(form.split()[-1]) + 1, victim + 1)
            ds.fetch(ids)
        else:
            _call(ds, form, victim)
    assert not verifier.seen[28]
    assert np.array_equal(np.asarray(_call(ds, form if form in FORMS else "ds.fetch(array)", 1101)["input_array"])[0],
                          clean[1101])
