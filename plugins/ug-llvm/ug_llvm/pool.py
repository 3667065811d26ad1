"""The cpu device's worker threads, which wait for work spinning for a while before they sleep.

Waking a sleeping thread took 50-150 us on the shared 2-core machine this was measured on, more
than many kernels take: a parallel launch of a 1M-element kernel or a 256^3 product paid it on
every call. So a worker that finishes a job waits for the next one in native code (GIL
released), spinning on the job counter for about SPIN_US microseconds, and only then goes to
sleep on a condition. A launch that comes while the workers spin reaches them in microseconds.

Native jobs (`post_native`: a function `void f(ptr arg, i64 index)` and its argument; the
gemm's and attention's parallel entries, a parallel launch's ranges) are run by the worker's
native loop itself (`ug_pool_serve`), which never takes the GIL: a worker that returned to
Python after each job waited for the GIL at every hand-off (the poster holds it until it enters
native code, and then the worker had to be woken from the GIL's futex: 50-90 us per job, so it
joined a 1 ms product late, or not at all, about a quarter of the time in a training step).
Python jobs (`post`) still return to Python to run.

A job is a function of the worker's index (1 .. workers) that shares its work out itself (a
shared iterator of ranges, the gemm's atomic counters), so whoever posts it also runs it on its
own thread and never waits for a worker that has not started: a late worker finds the work
taken. A worker may see a later job than the counter value it woke on, or the same job twice:
both are harmless for such jobs.

Publishing: a job goes into one of SLOTS slots (its sequence number modulo SLOTS) and the job
counter is bumped. A worker counts itself in the slot's `users`, then checks that the slot still
holds that job (`live`), and only then reads it; whoever reuses the slot first marks it retired
and waits until its users are gone (both sides sequentially consistent: either the worker sees the
retirement or the poster sees the worker). So a worker never reads a half-written job, and a job's
argument (kept alive by the pool until its slot is reused) outlives every worker that runs it. The
publish runs holding the GIL (a PYFUNCTYPE call), which orders concurrent posters.

Posting and waiting are one critical section for Ctrl-C (ug_core.faults.defer_interrupts): a
KeyboardInterrupt between them left the workers writing a buffer that had gone back to the
pool. A forked child has no workers (`after_fork`): new ones start on its first post.
"""

from __future__ import annotations

import array
import ctypes
import threading
import time
from typing import Any, Callable

from ug_core.kit import defer_interrupts

from .settings import SPIN_US

SLOTS = 4          # jobs published before a slot is reused (a power of two)
SLOT_FIELDS = 8    # i64 fields per slot (one cache line): live, users, fn, arg, limit
_LIVE, _USERS, _FN, _ARG, _LIMIT = range(5)
_SLEEPERS = 1      # the state's field after the job counter: workers asleep on the futex
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
YIELD_EVERY = 64   # a spinning worker offers its core (sched_yield) every this many looks
STATE_SIZE = SLOT_FIELDS * (SLOTS + 1)   # the job counter alone on the first line, then the slots

_SERVE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64)
# the publish holds the GIL (PYFUNCTYPE): posters from several Python threads take turns
_PUBLISH = ctypes.PYFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_RANGES = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_void_p, ctypes.c_int64)
_SET_ARGS = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
_NATIVE_JOB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
RANGES_DESC = 6    # i64 fields of a ranges job: fn, args, n, step, claimed, done


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


def _slot_ir(seq: str, state: str = "%state") -> list[str]:
    """IR computing pointers %live.p, %users.p, %fn.p, %arg.p, %limit.p of job `seq`'s slot."""
    lines = [f"  %slot = and i64 {seq}, {SLOTS - 1}",
             f"  %slot.1 = add i64 %slot, 1",
             f"  %slot.at = mul i64 %slot.1, {SLOT_FIELDS}"]
    for name, field in (("live", _LIVE), ("users", _USERS), ("fn", _FN), ("arg", _ARG), ("limit", _LIMIT)):
        lines += [f"  %{name}.i = add i64 %slot.at, {field}",
                  f"  %{name}.p = getelementptr inbounds i64, ptr {state}, i64 %{name}.i"]
    return lines


def _module_ir(triple: str, data_layout: str) -> str:
    """The pool's native part:

    `i64 ug_pool_serve(ptr state, i64 index, i64 seen, i64 spins, i64 sleeps)`: a worker's loop.
    Waits for the job counter to differ from `seen`, looking at most `spins` times in a row (and
    offering its core every YIELD_EVERY looks); runs each native job it finds (fn(arg, index),
    where index < the job's limit) and goes on waiting. After `spins` looks without a job it
    sleeps on the counter (a futex, where `sleeps` and the platform has one: no GIL on the way
    back) and then looks again, or returns ~seen (negative) for the worker to sleep in Python.
    Returns the counter's value at a Python job (fn 0).

    `i64 ug_pool_publish(ptr state, i64 fn, i64 arg, i64 limit)`: posts a job (see the module
    docstring) and returns its sequence number.

    `void ug_pool_ranges(ptr fn, ptr args, i64 n, i64 step, ptr counters, i64 wait)`: claim
    ranges [s, s + step) of [0, n) from counters[0] and run fn(args, s, min(s + step, n)) until
    none is left, counting finished indices in counters[1] (release); with `wait`, then wait
    until all n are finished (wait_until_ir). The threads of a parallel launch all run this:
    one native call each, so a thread takes the GIL once per launch, not once per range (on a
    busy 2-core machine two threads trading the GIL between short ranges waited 50+ us at each
    trade). `ug_pool_ranges_job(ptr desc, i64 index)` runs it for a worker on a ranges job's
    descriptor (fn, args, n, step, counters...), `ug_pool_set_args(ptr desc, ptr args)` puts the
    launch's argument array into one."""
    x86 = triple.startswith(("x86_64", "i686", "i386"))
    pause = "  call void @llvm.x86.sse2.pause()" if x86 else ""
    futex = futex_syscall(triple)
    return "\n".join([
        f'target triple = "{triple}"',
        f'target datalayout = "{data_layout}"',
        "declare i64 @syscall(i64, ...)" if futex else "",
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
        "define void @ug_pool_ranges_job(ptr %desc, i64 %index) {",
        "  %fn = load ptr, ptr %desc, align 8",
        "  %ap = getelementptr inbounds i64, ptr %desc, i64 1",
        "  %args = load ptr, ptr %ap, align 8",
        "  %np = getelementptr inbounds i64, ptr %desc, i64 2",
        "  %n = load i64, ptr %np, align 8",
        "  %sp = getelementptr inbounds i64, ptr %desc, i64 3",
        "  %step = load i64, ptr %sp, align 8",
        "  %counters = getelementptr inbounds i64, ptr %desc, i64 4",
        "  call void @ug_pool_ranges(ptr %fn, ptr %args, i64 %n, i64 %step, ptr %counters, i64 0)",
        "  ret void",
        "}",
        "define void @ug_pool_set_args(ptr %desc, ptr %args) {",
        "  %ap = getelementptr inbounds i64, ptr %desc, i64 1",
        "  store ptr %args, ptr %ap, align 8",
        "  ret void",
        "}",
        "define i64 @ug_pool_publish(ptr %state, i64 %fn, i64 %arg, i64 %limit) {",
        "entry:",
        "  %last = load atomic i64, ptr %state monotonic, align 8",
        "  %seq = add i64 %last, 1",
        *_slot_ir("%seq"),
        # retire the slot's old job, then wait for the workers inside it to leave
        "  store atomic i64 0, ptr %live.p seq_cst, align 8",
        "  br label %look",
        "look:",
        "  %spins = phi i64 [ 0, %entry ], [ %spins.next, %spin ], [ %spins.next, %yield ]",
        "  %users = load atomic i64, ptr %users.p seq_cst, align 8",
        "  %free = icmp eq i64 %users, 0",
        "  br i1 %free, label %write, label %again",
        "again:",
        "  %spins.next = add nuw i64 %spins, 1",
        "  %long = icmp ugt i64 %spins.next, 4096",
        "  br i1 %long, label %yield, label %spin",
        "spin:",
        pause,
        "  br label %look",
        "yield:",
        "  %r = call i32 @sched_yield()",
        "  br label %look",
        "write:",
        "  store atomic i64 %fn, ptr %fn.p monotonic, align 8",
        "  store atomic i64 %arg, ptr %arg.p monotonic, align 8",
        "  store atomic i64 %limit, ptr %limit.p monotonic, align 8",
        "  store atomic i64 %seq, ptr %live.p release, align 8",
        "  store atomic i64 %seq, ptr %state seq_cst, align 8",
        *([f"  %sleepers.p = getelementptr inbounds i64, ptr %state, i64 {_SLEEPERS}",
           "  %sleepers = load atomic i64, ptr %sleepers.p seq_cst, align 8",
           "  %any = icmp ne i64 %sleepers, 0",
           "  br i1 %any, label %wake, label %out",
           "wake:",
           f"  %woken = call i64 (i64, ...) @syscall(i64 {futex}, ptr %state, i64 {FUTEX_WAKE_PRIVATE}, "
           "i64 2147483647, ptr null, ptr null, i64 0)",
           "  br label %out",
           "out:"] if futex else []),
        "  ret i64 %seq",
        "}",
        "define i64 @ug_pool_serve(ptr %state, i64 %index, i64 %seen, i64 %spins, i64 %sleeps) {",
        "entry:",
        "  br label %look",
        "look:",
        "  %seen.c = phi i64 [ %seen, %entry ], [ %seen.c, %spin ], [ %seen.c, %yield ], [ %now, %next ]"
        + (", [ %seen.c, %woke ]" if futex else ""),
        "  %i = phi i64 [ 0, %entry ], [ %i.next, %spin ], [ %i.next, %yield ], [ 0, %next ]"
        + (", [ 0, %woke ]" if futex else ""),
        "  %now = load atomic i64, ptr %state acquire, align 8",
        "  %new = icmp ne i64 %now, %seen.c",
        "  br i1 %new, label %take, label %idle",
        "idle:",
        "  %i.next = add nuw i64 %i, 1",
        "  %enough = icmp uge i64 %i.next, %spins",
        "  br i1 %enough, label %timeout, label %idle.more",
        "idle.more:",
        f"  %turn = and i64 %i.next, {YIELD_EVERY - 1}",
        "  %yields = icmp eq i64 %turn, 0",
        "  br i1 %yields, label %yield, label %spin",
        "spin:",
        pause,
        "  br label %look",
        "yield:",
        "  %y = call i32 @sched_yield()",
        "  br label %look",
        "timeout:",
        "  %asleep = xor i64 %seen.c, -1",
        *(["  %may = icmp ne i64 %sleeps, 0", "  br i1 %may, label %to.sleep, label %back", "back:",
           "  ret i64 %asleep", "to.sleep:", *_futex_sleep(futex)] if futex else ["  ret i64 %asleep"]),
        "take:",
        *_slot_ir("%now"),
        "  %in = atomicrmw add ptr %users.p, i64 1 seq_cst, align 8",
        "  %live = load atomic i64, ptr %live.p seq_cst, align 8",
        "  %current = icmp eq i64 %live, %now",
        "  br i1 %current, label %read, label %next",
        "read:",
        "  %fn = load atomic i64, ptr %fn.p monotonic, align 8",
        "  %arg = load atomic i64, ptr %arg.p monotonic, align 8",
        "  %limit = load atomic i64, ptr %limit.p monotonic, align 8",
        "  %python = icmp eq i64 %fn, 0",
        "  br i1 %python, label %to.python, label %native",
        "to.python:",
        "  %out.p = atomicrmw sub ptr %users.p, i64 1 release, align 8",
        "  ret i64 %now",
        "native:",
        "  %mine = icmp slt i64 %index, %limit",
        "  br i1 %mine, label %call, label %next",
        "call:",
        "  %f = inttoptr i64 %fn to ptr",
        "  %a = inttoptr i64 %arg to ptr",
        "  call void %f(ptr %a, i64 %index)",
        "  br label %next",
        "next:",
        "  %out.n = atomicrmw sub ptr %users.p, i64 1 release, align 8",
        "  br label %look",
        "}",
    ])


def futex_syscall(triple: str) -> int:
    """The futex system call's number where workers sleep on it natively (64-bit little-endian
    Linux: the wait compares the job counter's low half), else 0: they sleep in Python."""
    if "linux" not in triple:
        return 0
    return {"x86_64": 202, "aarch64": 98}.get(triple.split("-")[0], 0)


def _futex_sleep(futex: int) -> list[str]:
    """IR of a worker going to sleep on the job counter (the `timeout` block's continuation):
    count itself among the sleepers, look once more (a poster reads the count after bumping the
    counter: sequentially consistent, so either it wakes the sleepers or this look sees its job),
    sleep while the counter is still `seen`, then look again."""
    return [
        f"  %sleepers.p = getelementptr inbounds i64, ptr %state, i64 {_SLEEPERS}",
        "  %in.sleep = atomicrmw add ptr %sleepers.p, i64 1 seq_cst, align 8",
        "  %last = load atomic i64, ptr %state seq_cst, align 8",
        "  %moved = icmp ne i64 %last, %seen.c",
        "  br i1 %moved, label %woke, label %sleep",
        "sleep:",
        "  %low = and i64 %seen.c, 4294967295",
        f"  %slept = call i64 (i64, ...) @syscall(i64 {futex}, ptr %state, i64 {FUTEX_WAIT_PRIVATE}, i64 %low, "
        "ptr null, ptr null, i64 0)",
        "  br label %woke",
        "woke:",
        "  %out.sleep = atomicrmw sub ptr %sleepers.p, i64 1 seq_cst, align 8",
        "  br label %look",
    ]


class SpinPool:
    """`workers` daemon threads that run posted jobs (see the module docstring). `spins`: how
    many looks at the job counter a worker makes before it sleeps (default: as many as take
    about SPIN_US microseconds on this machine, measured once)."""

    def __init__(self, jit: Any, workers: int, spins: int | None = None):
        self.workers = workers
        self._state = array.array("q", bytes(8 * STATE_SIZE))   # the job counter, then the slots
        self._state_at = self._state.buffer_info()[0]
        self._keep: list[Any] = [None] * SLOTS    # what each slot's job points at, alive until reuse
        self._job: Callable[[int], None] | None = None
        self._asleep = 0
        self._wake = threading.Condition()
        self._serve = _SERVE(jit.load(_module_ir(jit.triple, jit.data_layout), "ug_pool_serve"))
        self._publish = _PUBLISH(jit.address("ug_pool_publish"))
        self._ranges = _RANGES(jit.address("ug_pool_ranges"))
        self._ranges_job = jit.address("ug_pool_ranges_job")
        self._set_args = _SET_ARGS(jit.address("ug_pool_set_args"))
        self._spins = spins if spins is not None else _spins_for(self._serve, SPIN_US)
        self._start()

    def _start(self) -> None:
        self._started = True
        for index in range(1, self.workers + 1):
            threading.Thread(target=self._work, args=(index,), name=f"ug-cpu-{index}", daemon=True).start()

    def after_fork(self) -> None:
        """In a forked child, which has only the forking thread: the workers are gone (a job
        would be run by its poster alone) and one may have held the condition's lock. A new
        condition, and new workers on the next post (a child that never computes starts none);
        no worker is inside a slot any more."""
        self._wake = threading.Condition()
        self._asleep = 0
        self._job = None
        for slot in range(SLOTS):
            self._state[SLOT_FIELDS * (slot + 1) + _USERS] = 0
        self._state[_SLEEPERS] = 0
        self._started = False

    @property
    def asleep(self) -> int:
        """How many workers are asleep (on the futex, or in Python where there is none)."""
        return self._asleep + self._state[_SLEEPERS]

    def _posted(self, seq: int, keep: Any) -> None:
        self._keep[seq & (SLOTS - 1)] = keep
        if self._asleep:       # (read after the publish; a worker counts itself asleep before its last look)
            with self._wake:
                self._wake.notify_all()

    def post(self, job: Callable[[int], None]) -> None:
        """Have the workers run job(index) (a Python function), as soon as they can; does not
        wait for them."""
        if not self._started:
            self._start()
        self._job = job
        self._posted(self._publish(self._state_at, 0, 0, self.workers + 1), job)

    def post_native(self, fn: int, arg: int, keep: Any, limit: int) -> None:
        """Have the workers with index < limit run the native `void fn(ptr arg, i64 index)` as
        soon as they can, without the GIL; does not wait for them. `keep` holds what `arg`
        points at: the pool keeps it alive until no worker can reach it."""
        if not self._started:
            self._start()
        self._posted(self._publish(self._state_at, fn, arg, limit), keep)

    def run_native(self, entry: Any, fn: int, arg: int, keep: Any, threads: int) -> None:
        """fn(arg, index) on this thread (index 0, through `entry`, its ctypes function) and on
        the workers 1 .. threads - 1, for work that the threads share out themselves and whose
        index-0 call returns when all of it is done: so this does not wait for the workers."""
        with defer_interrupts:   # (the workers must not outlive the call)
            self.post_native(fn, arg, keep, threads)
            entry(arg, 0)

    def run_ranges(self, fn: int, args: bytes, n: int, step: int) -> None:
        """fn(args, start, end) (fn: the address of a kernel's ranged entry) over [0, n) in ranges
        of `step`, on this thread and whichever workers join (see ug_pool_ranges); returns when
        every range is done. A worker that comes after that finds none left (the descriptor and
        `args` stay alive with the slot)."""
        desc = array.array("q", (fn, 0, n, step, 0, 0))
        at = desc.buffer_info()[0]
        self._set_args(at, args)
        with defer_interrupts:
            self.post_native(self._ranges_job, at, (desc, args), self.workers + 1)
            self._ranges(fn, args, n, step, at + 32, 1)

    def _work(self, index: int) -> None:
        seen = self._state[0]
        serve = self._serve
        while True:
            now = serve(self._state_at, index, seen, self._spins, 1)
            if now < 0:  # nothing for a while: sleep until a post
                seen = ~now
                with self._wake:
                    self._asleep += 1
                    try:
                        self._wake.wait_for(lambda: self._state[0] != seen)
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


def _spins_for(serve: Any, microseconds: int) -> int:
    """How many looks at an unchanging job counter take about `microseconds` here (the pause
    instruction's length differs by a factor of 5-10 between CPUs): timed on 4096 looks, the
    fastest of three (a preempted try only reads slower)."""
    if microseconds <= 0:
        return 0
    probe = array.array("q", bytes(8 * STATE_SIZE))
    at = probe.buffer_info()[0]
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        serve(at, 1, 0, 4096, 0)
        best = min(best, time.perf_counter() - start)
    return max(1, int(4096 * microseconds * 1e-6 / max(best, 1e-9)))
