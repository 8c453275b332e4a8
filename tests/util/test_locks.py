"""Claims between processes: slots exclude every other holder, die with their holder, and split work."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from consumer.util.locks import RangeLocks, claimed, slot_of


def test_two_holders_in_one_process_exclude_each_other(tmp_path):
    a, b = RangeLocks(str(tmp_path / "l")), RangeLocks(str(tmp_path / "l"))
    assert a.shared and b.shared
    assert a.try_lock({1, 2, 3}) == {1, 2, 3}
    assert b.try_lock({2, 3, 4}) == {4}  # not those a holds
    b.release()
    a.release()
    assert b.try_lock({2, 3}) == {2, 3}
    b.close()
    a.close()


def test_a_waiter_gets_the_slot_when_its_holder_releases_it(tmp_path):
    a, b = RangeLocks(str(tmp_path / "l")), RangeLocks(str(tmp_path / "l"))
    a.try_lock({7})
    got = threading.Event()

    def wait():
        b.wait_lock(7)
        got.set()

    t = threading.Thread(target=wait)
    t.start()
    assert not got.wait(0.3)  # still held by a
    a.release()
    assert got.wait(10)
    t.join()
    assert a.try_lock({7}) == set()


def test_a_killed_holder_releases_its_slots(tmp_path):
    path = str(tmp_path / "l")
    script = ("import sys, time; from consumer.util.locks import RangeLocks\n"
              "l = RangeLocks(sys.argv[1]); assert l.try_lock({5}) == {5}; print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", script, path], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    mine = RangeLocks(path)
    assert mine.try_lock({5}) == set()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while mine.try_lock({5}) != {5}:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    mine.close()


def test_claimed_never_hands_one_item_to_two_workers_at_once(tmp_path):
    """Each worker is handed every item once, never while the other holds it; the one that comes second to an
    item finds it done (what the catalog checks again), so every item is done once in all."""
    slots = [slot_of(f"item{i}") for i in range(300)]
    busy: set[int] = set()
    done: list[int] = []
    handed: dict[int, list[int]] = {0: [], 1: []}
    overlaps = []
    lock = threading.Lock()

    def worker(w):
        locks = RangeLocks(str(tmp_path / "l"))

        def work(part):
            with lock:
                overlaps.extend(i for i in part if i in busy)
                busy.update(part)
                handed[w].extend(part)
                todo = [i for i in part if i not in done]
                done.extend(todo)
            time.sleep(0.0005 * len(todo))
            with lock:
                busy.difference_update(part)

        claimed(locks, slots, 50, work)
        locks.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlaps
    assert sorted(handed[0]) == sorted(handed[1]) == list(range(300))
    assert sorted(done) == list(range(300))


def test_no_lock_file_means_every_slot_is_granted(tmp_path):
    locks = RangeLocks(str(tmp_path / "missing" / "l"))  # the directory does not exist
    assert not locks.shared and locks.try_lock({1, 2}) == {1, 2}
    seen = []
    claimed(locks, [1, 1, 2], 2, seen.extend)
    assert seen == [0, 1, 2]
