"""The cpu device's worker threads, which wait for work spinning for a while before they sleep.

Waking a sleeping thread took 50-150 us on the shared 2-core machine this was measured on, more
than many kernels take: a parallel launch of a 1M-element kernel or a 256^3 product paid it on
every call. So a worker that finishes a job first waits for the next one in native code (GIL
released), spinning on the job counter for up to SPINS pause instructions (a fraction of a ms),
and only then goes to sleep on a condition. A launch that comes while the workers spin reaches
them in microseconds: the poster sets the job and bumps the counter; the worker sees the bump,
takes the GIL as soon as the poster enters native code, and runs the job.

A job is a function of the worker's index (1 .. workers) that shares its work out itself (a
shared iterator of ranges, the gemm's atomic counters), so whoever posts it also runs it on its
own thread and never waits for a worker that has not started: a late worker finds the work
taken. A worker may see a later job than the counter value it woke on, or the same job twice:
both are harmless for such jobs.

Posting and waiting are one critical section for Ctrl-C (ug_core.faults.defer_interrupts): a
KeyboardInterrupt between them left the workers writing a buffer that had gone back to the
pool. A forked child has no workers (`after_fork`): new ones start on its first post.
"""

from __future__ import annotations

import array
import ctypes
import threading
from typing import Any, Callable

from ug_core.faults import defer_interrupts

from .settings import SPINS

_WAIT = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


_RANGES = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_void_p, ctypes.c_int64)


def wait_until_ir(name: str, triple: str) -> str:
    """LLVM IR of `void {name}(ptr counter, i64 total)` (internal, with the declarations it
    needs): returns once *counter >= total (acquire: what the threads that counted wrote is
    visible after it). Spins a while (the units left are usually short), then yields the core at
    each look (a thread that holds one may have been descheduled). The gemm's threads and a
    parallel launch's caller wait with it."""
    x86 = triple.startswith(("x86_64", "i686", "i386"))
    return "\n".join([
        f"define internal void @{name}(ptr %counter, i64 %total) {{",
        "entry:",
        "  br label %look",
        "look:",
        "  %spins = phi i64 [ 0, %entry ], [ %spins.next, %spin ], [ %spins.next, %yield ]",
        "  %now = load atomic i64, ptr %counter acquire, align 8",
        "  %ready = icmp sge i64 %now, %total",
        "  br i1 %ready, label %out, label %again",
        "again:",
        "  %spins.next = add nuw i64 %spins, 1",
        "  %long = icmp ugt i64 %spins.next, 4096",
        "  br i1 %long, label %yield, label %spin",
        "spin:",
        "  call void @llvm.x86.sse2.pause()" if x86 else "",
        "  br label %look",
        "yield:",
        "  %r = call i32 @sched_yield()",
        "  br label %look",
        "out:",
        "  ret void",
        "}",
        "declare i32 @sched_yield()",
        "declare void @llvm.x86.sse2.pause()" if x86 else "",
    ])


def _module_ir(triple: str, data_layout: str) -> str:
    """`i64 ug_pool_wait(ptr counter, i64 seen, i64 spins)`: the counter's value once it is not
    `seen`, or `seen` after `spins` looks.

    `void ug_pool_ranges(ptr fn, ptr args, i64 n, i64 step, ptr counters, i64 wait)`: claim
    ranges [s, s + step) of [0, n) from counters[0] and run fn(args, s, min(s + step, n)) until
    none is left, counting finished indices in counters[1] (release); with `wait`, then wait
    until all n are finished (wait_until_ir). The threads of a
    parallel launch all run this: one native call each, so a thread takes the GIL once per
    launch, not once per range (on a busy 2-core machine two threads trading the GIL between
    short ranges waited 50+ us at each trade)."""
    x86 = triple.startswith(("x86_64", "i686", "i386"))
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        "define void @ug_pool_ranges(ptr %fn, ptr %args, i64 %n, i64 %step, ptr %counters, i64 %wait) {",
        "entry:",
        "  %done = getelementptr inbounds i64, ptr %counters, i64 1",
        "  br label %claim",
        "claim:",
        "  %s = atomicrmw add ptr %counters, i64 %step monotonic, align 8",
        "  %more = icmp slt i64 %s, %n",
        "  br i1 %more, label %run, label %finish",
        "run:",
        "  %e0 = add nsw i64 %s, %step",
        "  %short = icmp slt i64 %e0, %n",
        "  %e = select i1 %short, i64 %e0, i64 %n",
        "  call void %fn(ptr %args, i64 %s, i64 %e)",
        "  %count = sub nsw i64 %e, %s",
        "  %d = atomicrmw add ptr %done, i64 %count release, align 8",
        "  br label %claim",
        "finish:",
        "  %waits = icmp ne i64 %wait, 0",
        "  br i1 %waits, label %wait.all, label %out",
        "wait.all:",
        "  call void @ug_pool_wait_done(ptr %done, i64 %n)",
        "  br label %out",
        "out:",
        "  ret void",
        "}",
        wait_until_ir("ug_pool_wait_done", triple),
        "define i64 @ug_pool_wait(ptr %counter, i64 %seen, i64 %spins) {",
        "entry:",
        "  br label %look",
        "look:",
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %spin ]",
        "  %now = load atomic i64, ptr %counter acquire, align 8",
        "  %new = icmp ne i64 %now, %seen",
        "  br i1 %new, label %out, label %more",
        "more:",
        "  %i.next = add nuw i64 %i, 1",
        "  %enough = icmp uge i64 %i.next, %spins",
        "  br i1 %enough, label %out, label %spin",
        "spin:",
        "  call void @llvm.x86.sse2.pause()" if x86 else "",
        "  br label %look",
        "out:",
        "  ret i64 %now",
        "}",
    ])


class SpinPool:
    """`workers` daemon threads that run posted jobs (see the module docstring)."""

    def __init__(self, jit: Any, workers: int, spins: int = SPINS):
        self.workers = workers
        self._spins = spins
        self._posted = array.array("q", [0])            # the job counter the workers spin on
        self._posted_at = self._posted.buffer_info()[0]
        self._job: Callable[[int], None] | None = None
        self._asleep = 0
        self._wake = threading.Condition()
        self._wait = _WAIT(jit.load(_module_ir(jit.triple, jit.data_layout), "ug_pool_wait"))
        self._ranges = _RANGES(jit.address("ug_pool_ranges"))
        self._start()

    def _start(self) -> None:
        self._started = True
        for index in range(1, self.workers + 1):
            threading.Thread(target=self._work, args=(index,), name=f"ug-cpu-{index}", daemon=True).start()

    def after_fork(self) -> None:
        """In a forked child, which has only the forking thread: the workers are gone (a job
        would be run by its poster alone) and one may have held the condition's lock. A new
        condition, and new workers on the next post (a child that never computes starts none)."""
        self._wake = threading.Condition()
        self._asleep = 0
        self._job = None
        self._started = False

    def post(self, job: Callable[[int], None]) -> None:
        """Have the workers run job(index), as soon as they can; does not wait for them."""
        if not self._started:
            self._start()
        self._job = job
        self._posted[0] += 1   # (two threads posting at once may bump it once: still a change)
        if self._asleep:       # (read after the bump; a worker counts itself asleep before its last look)
            with self._wake:
                self._wake.notify_all()

    def run_ranges(self, fn: int, args: bytes, n: int, step: int) -> None:
        """fn(args, start, end) (fn: the address of a kernel's ranged entry) over [0, n) in ranges
        of `step`, on this thread and whichever workers join (see ug_pool_ranges); returns when
        every range is done. A worker that comes after that finds none left (`counters` and
        `args` stay alive with the job)."""
        counters = array.array("q", (0, 0))
        at = counters.buffer_info()[0]
        ranges = self._ranges

        def job(worker: int, counters: array.array = counters) -> None:
            ranges(fn, args, n, step, at, 0)
        with defer_interrupts:
            self.post(job)
            ranges(fn, args, n, step, at, 1)

    def _work(self, index: int) -> None:
        seen = self._posted[0]
        while True:
            now = self._wait(self._posted_at, seen, self._spins)
            if now == seen:  # nothing for a while: sleep until a post
                with self._wake:
                    self._asleep += 1
                    try:
                        self._wake.wait_for(lambda: self._posted[0] != seen)
                    finally:
                        self._asleep -= 1
                continue
            seen = now
            job = self._job
            if job is not None:
                try:
                    job(index)
                except Exception:  # a job reports its own failures to whoever waits for it
                    pass
