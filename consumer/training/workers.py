"""Worker processes of the training loader: batches written into a shared-memory ring, never pickled.

A :class:`WorkerPool` starts ``num_workers`` processes, each holding the batch maker (a picklable
``fetch(request) -> {column: numpy array}``), and one shared-memory segment cut into slots of one batch
each, allocated once. The main process sends a worker ``(seq, slot, request)`` through the worker's own
pipe; the worker fetches the batch, copies its ``[B, ...]`` columns (the token rows) straight into the slot
and answers ``(seq, slot, shapes, small columns)`` — a few hundred bytes whatever the batch size. The main
process wraps the slot in numpy arrays (no copy) and hands them on. A slot holds the largest batch (``max_rows``
rows as wide as the probe's); a smaller or narrower batch (a token-budget batch) fills the front of it.

**Slot lifetime.** A slot is reused only once every array handed out for it has been garbage-collected
(a ``weakref.finalize`` per array; ``torch.from_numpy`` keeps the array alive as long as any tensor or
view of it lives). A batch therefore stays valid for as long as the caller keeps it, exactly as a freshly
allocated one would. A caller that keeps many batches keeps their slots: when every slot is held and
nothing is in flight, the next batch is read in the main process instead (correct, only slower).

**Clean-up.** With the ``fork`` start method the segment's name is removed before any worker starts (the
workers inherit the mapping), with ``spawn``/``forkserver`` as soon as every worker has attached it: once a
pool runs, nothing is left in ``/dev/shm`` whatever happens to the process (an exception, Ctrl-C,
``kill -9``). Workers ignore SIGINT (the main process handles it) and exit when their pipe closes, which
also happens when the main process dies. A worker exception is re-raised in the main process with the
worker's number, pid and traceback; a worker that dies is reported with its exit code.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing import connection
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Any, Generic, TypeVar

import numpy as np

from ..errors import ConsumerError, InputError, WorkerError, short_repr
from .ring import Columns, Layout, Segment, Shapes, Slots, check_shared_memory, ring_layout, views

__all__ = ["Columns", "Fetch", "WorkerPool", "ring_layout"]

R = TypeVar("R")
Fetch = Callable[[R], Columns]
"""The batch maker a worker runs: a picklable ``fetch(request) -> columns`` (the request type is the caller's)."""
_Answer = tuple[int, int, Shapes, "Columns | None", "tuple[BaseException | None, str] | None"]
_WATCH_S = 2.0  # how often an idle worker checks that its parent lives


def _work(wid: int, conn: Connection, fetch: Fetch[Any], shm: SharedMemory | str, layout: Layout,
          slot_bytes: int, init: Callable[[int], object] | None, inherited: list[Connection], parent: int) -> None:
    """A worker's loop: answer tasks from ``conn`` until it sends ``None`` or closes, or the parent is gone.
    ``inherited``: the main process's pipe ends a forked worker got by inheritance (closed at once, so that
    the death of the main process closes every worker's pipe)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    for c in inherited:
        c.close()
    try:
        segment = shm if isinstance(shm, SharedMemory) else SharedMemory(name=shm)
        ring = np.ndarray((segment.size,), dtype=np.uint8, buffer=segment.buf)
        if init is not None:
            init(wid)
        conn.send(("ready", wid, os.getpid()))
    except BaseException as exc:  # noqa: BLE001  (reported to the main process, which raises it)
        conn.send(("failed", wid, _portable(exc), traceback.format_exc()))
        return
    big = {name for name, *_ in layout}
    while True:
        try:
            while not conn.poll(_WATCH_S):
                if os.getppid() != parent:  # orphaned (the pipe may have been inherited by another process)
                    return
            task = conn.recv()
        except (EOFError, OSError):  # the main process closed the pipe or died
            break
        if task is None:
            break
        seq, slot, request = task
        try:
            cols = fetch(request)
            shapes = {name: tuple(cols[name].shape) for name in big}
            slot_views = views(ring, layout, slot_bytes, slot, shapes)
            for name, view in slot_views.items():
                arr = cols[name]
                if arr.dtype != view.dtype:
                    raise WorkerError(f"column {name!r}: batch of {arr.dtype}, the ring expects {view.dtype}")
                np.copyto(view, arr)
            del slot_views
            answer: _Answer = (seq, slot, shapes, {k: v for k, v in cols.items() if k not in big}, None)
        except Exception as exc:  # noqa: BLE001  (re-raised by the main process)
            answer = (seq, slot, {}, None, (_portable(exc), traceback.format_exc()))
        try:
            conn.send(answer)
        except (BrokenPipeError, OSError):
            break


def _portable(exc: BaseException) -> BaseException | None:
    """``exc`` if it survives pickling, else ``None`` (the traceback text still names it)."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return None


def _reraise(wid: int, pid: int | None, exc: BaseException | None, tb: str) -> BaseException:
    """The error to raise in the main process for an exception of worker ``wid``: the same class when it can
    be made from a message (so ``except FileChangedError`` keeps working), else :class:`WorkerError`."""
    name = type(exc).__name__ if exc is not None else "an exception"
    message = f"loader worker {wid} (pid {pid}) raised {name}: {exc}\n\nworker traceback:\n{tb}"
    if exc is not None and isinstance(exc, (ConsumerError, ValueError, KeyError, IndexError, OSError, TypeError,
                                            RuntimeError)):
        try:
            return type(exc)(message)
        except Exception:  # noqa: BLE001  (a constructor that wants other arguments)
            pass
    return WorkerError(message)


class WorkerPool(Generic[R]):
    """``num_workers`` processes serving batches through a ring of ``num_workers * prefetch_factor + 2`` slots.

    ``run(requests)`` yields the batches of ``requests`` in order, as dicts of numpy arrays; only the
    latest ``run`` is live (starting one ends the previous). :meth:`close` stops the workers.
    """

    def __init__(self, fetch: Fetch[R], probe: Columns, max_rows: int, num_workers: int, *, prefetch_factor: int = 2,
                 context: str | BaseContext | None = None, worker_init_fn: Callable[[int], object] | None = None,
                 timeout: float = 0, max_width: int = 0):
        # Any: typeshed's BaseContext lacks .Process, which every concrete context has
        ctx: Any = multiprocessing.get_context(context) if context is None or isinstance(context, str) else context
        self.fetch, self.timeout = fetch, float(timeout)
        self.layout, self.slot_bytes = ring_layout(probe, max_rows, max_width)
        n_slots = num_workers * prefetch_factor + 2
        check_shared_memory(n_slots, self.slot_bytes, num_workers, prefetch_factor)
        self.slots = Slots(n_slots)
        self.shm = Segment(create=True, size=max(n_slots * self.slot_bytes, 1))
        self.ring = np.ndarray((self.shm.size,), dtype=np.uint8, buffer=self.shm.buf)  # the one buffer export
        self._unlinked = False
        forked = ctx.get_start_method() == "fork"
        if forked:
            self._unlink()  # the workers inherit the mapping: no name needs to outlive this line
        self.conns: list[Connection] = []
        self.procs: list[BaseProcess] = []
        self._seq = 0
        self._run_id = 0
        self._inflight: dict[int, int] = {}  # seq -> run id, of tasks sent and not answered
        self._answers: dict[int, tuple[int, Shapes, Columns]] = {}
        self._turn = 0
        self.closed = False
        try:
            for wid in range(num_workers):
                mine, theirs = ctx.Pipe(duplex=True)
                p = ctx.Process(target=_work, name=f"consumer-loader-{wid}", daemon=True,
                                args=(wid, theirs, fetch, self.shm if forked else self.shm.name, self.layout,
                                      self.slot_bytes, worker_init_fn, [*self.conns, mine] if forked else [],
                                      os.getpid()))
                p.start()
                theirs.close()
                self.conns.append(mine)
                self.procs.append(p)
            for wid in range(num_workers):
                msg = self._recv(wid)
                if msg[0] == "failed":
                    raise _reraise(wid, self.procs[wid].pid, msg[2], msg[3])
        except BaseException:
            self.close()
            raise
        self._unlink()

    # ------------------------------------------------------------ plumbing
    def _unlink(self) -> None:
        if not self._unlinked:
            self._unlinked = True
            self.shm.unlink()

    def _died(self, wid: int) -> WorkerError:
        p = self.procs[wid]
        p.join(0.5)
        return WorkerError(f"loader worker {wid} (pid {p.pid}) exited unexpectedly with code {p.exitcode} "
                           "(killed, or out of memory?)")

    def _recv(self, wid: int) -> tuple[Any, ...]:
        """The next message of worker ``wid`` (start-up only)."""
        conn, p = self.conns[wid], self.procs[wid]
        while not conn.poll(0.1):
            if not p.is_alive() and not conn.poll(0):
                raise self._died(wid)
        try:
            message: tuple[Any, ...] = conn.recv()
            return message
        except (EOFError, OSError):
            raise self._died(wid) from None

    def _collect(self) -> None:
        """Wait for at least one answer (or a dead worker, or the timeout) and file what arrived."""
        sentinels = {p.sentinel: wid for wid, p in enumerate(self.procs)}
        conns = {id(c): wid for wid, c in enumerate(self.conns)}
        deadline = time.monotonic() + self.timeout if self.timeout > 0 else None
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            ready = connection.wait([*self.conns, *sentinels], left)
            if not ready:
                raise WorkerError(f"timeout={self.timeout}: no batch from the loader workers within "
                                  f"{self.timeout} s")
            got = False
            for r in ready:
                if id(r) in conns:
                    wid = conns[id(r)]
                    try:
                        seq, slot, shapes, small, error = self.conns[wid].recv()
                    except (EOFError, OSError):
                        raise self._died(wid) from None
                    run = self._inflight.pop(seq)
                    if run != self._run_id:  # answer of an abandoned run: its slot is free again
                        self.slots.free.append(slot)
                        continue
                    if error is not None:
                        self.slots.free.append(slot)
                        raise _reraise(wid, self.procs[wid].pid, *error)
                    self._answers[seq] = (slot, shapes, small or {})
                    got = True
            if got:
                return
            for s, wid in sentinels.items():
                if s in ready and not self.conns[wid].poll(0):
                    raise self._died(wid)

    def _wrap(self, slot: int, shapes: Shapes, small: Columns) -> Columns:
        big = views(self.ring, self.layout, self.slot_bytes, slot, shapes)
        self.slots.hold(slot, list(big.values()))
        return {**big, **small}

    # ------------------------------------------------------------ the stream
    def run(self, requests: Iterator[R]) -> Iterator[Columns]:
        """The batches of ``requests`` in order (ends any earlier run of this pool)."""
        if self.closed:
            raise InputError("this loader's worker pool is closed; start a new iteration of the loader")
        self._run_id += 1
        for slot, _shapes, _small in self._answers.values():  # read for an abandoned run, never handed out
            self.slots.free.append(slot)
        self._answers.clear()
        return self._stream(self._run_id, iter(requests))

    def _stream(self, run_id: int, requests: Iterator[R]) -> Iterator[Columns]:
        try:
            yield from self._serve(run_id, requests)
        except Exception:  # a failed pass leaves tasks in flight: the next pass starts a fresh pool
            self.close()
            raise
        except KeyboardInterrupt:
            self.close()
            raise

    def _serve(self, run_id: int, requests: Iterator[R]) -> Iterator[Columns]:
        pending: deque[tuple[int, R]] = deque()  # (seq, request) not yet sent, in order
        order: deque[int] = deque()  # seqs sent, in order
        exhausted = False
        collected = False  # collected garbage since the last slot came free, in vain
        while True:
            if run_id != self._run_id or self.closed:
                return
            collected = collected and not self.slots.free
            while self.slots.free and not exhausted:  # fill the ring
                if not pending:
                    req = next(requests, None)
                    if req is None:
                        exhausted = True
                        break
                    pending.append((self._seq, req))
                    self._seq += 1
                seq, req = pending.popleft()
                try:
                    self.conns[self._turn].send((seq, self.slots.free.popleft(), req))
                except OSError:  # a broken pipe: the worker is gone
                    raise self._died(self._turn) from None
                self._turn = (self._turn + 1) % len(self.conns)
                self._inflight[seq] = run_id
                order.append(seq)
            if order:
                while order[0] not in self._answers:
                    self._collect()
                slot, shapes, small = self._answers.pop(order.popleft())
                yield self._wrap(slot, shapes, small)
                continue
            if exhausted and not pending:
                return
            if not collected:  # every slot is held: by the caller, or by garbage not yet collected
                gc.collect()
                collected = bool(not self.slots.free)  # a caller keeping them all: no collection per batch
            if not self.slots.free:  # the caller keeps them all: read the next batch here
                if not pending:
                    req = next(requests, None)
                    if req is None:
                        return
                    pending.append((self._seq, req))
                    self._seq += 1
                yield self.fetch(pending.popleft()[1])

    def close(self) -> None:
        """Stop the workers and release the ring (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for c in self.conns:
            try:
                c.send(None)
            except (OSError, ValueError):
                pass
        for p in self.procs:
            p.join(2.0)
            if p.is_alive():
                p.terminate()
                p.join(2.0)
        for c in self.conns:
            c.close()
        self._unlink()
        del self.ring
        self.shm.release()

    def __repr__(self) -> str:
        return (f"WorkerPool(workers={len(self.procs)}, slots={len(self.slots.live)}, "
                f"slot_bytes={self.slot_bytes}, layout={short_repr([x[0] for x in self.layout])})")
