"""The cpu device's worker threads (ug_llvm.pool.SpinPool): jobs reach spinning and sleeping
workers, each worker runs a job under its own index, and posting never waits for them."""

import os
import threading
import time

from ug_llvm.jit import get_jit
from ug_llvm.pool import SpinPool


def _run_once(pool, workers):
    """Post a job and wait (bounded) until every worker has run it; their indices."""
    seen, lock, all_in = set(), threading.Lock(), threading.Event()

    def job(index):
        with lock:
            seen.add(index)
            if len(seen) == workers:
                all_in.set()
    pool.post(job)
    assert all_in.wait(10), f"workers {sorted(seen)} ran the job, of {workers}"
    return seen


def test_jobs_reach_spinning_and_sleeping_workers():
    pool = SpinPool(get_jit(), 3, spins=64)   # a short spin: the workers are soon asleep
    assert _run_once(pool, 3) == {1, 2, 3}
    assert _run_once(pool, 3) == {1, 2, 3}   # right after: (maybe) still spinning
    time.sleep(0.05)                          # asleep now
    assert pool.asleep == 3
    assert _run_once(pool, 3) == {1, 2, 3}


def test_post_does_not_wait_for_the_workers():
    pool = SpinPool(get_jit(), 1)
    release = threading.Event()
    started = threading.Event()

    def slow(index):
        started.set()
        release.wait(10)
    pool.post(slow)
    assert started.wait(10)
    t0 = time.perf_counter()
    pool.post(lambda index: None)   # the worker is busy with `slow`: post returns at once anyway
    assert time.perf_counter() - t0 < 0.5
    release.set()
    assert _run_once(pool, 1) == {1}   # and the worker is free again afterwards


def test_a_failing_job_does_not_stop_a_worker():
    pool = SpinPool(get_jit(), 1)

    def boom(index):
        raise RuntimeError("job failed")
    pool.post(boom)
    assert _run_once(pool, 1) == {1}


def test_parallel_launches_from_several_threads_at_once():
    """Kernels and products big enough for the workers, launched from four Python threads at once:
    posts replace each other's jobs, and each launch still gets all of its work done."""
    import numpy as np
    import ug_core as ug

    rng = np.random.default_rng(13)
    a = rng.standard_normal(1 << 20).astype(np.float32)
    m = rng.standard_normal((256, 256)).astype(np.float32)
    want_exp, want_sum, want_mm = np.exp(a * 0.5) + a, a.sum(dtype=np.float64), m @ m
    ta, tm = ug.tensor(a, device="cpu"), ug.tensor(m, device="cpu")
    f = ug.jit(lambda x: (x * 0.5).exp() + x)
    g = ug.jit(lambda x: x.sum())
    h = ug.jit(lambda x: x @ x)
    errors = []

    def worker():
        try:
            for _ in range(20):
                np.testing.assert_allclose(f(ta).numpy(), want_exp, rtol=1e-5, atol=1e-6)
                np.testing.assert_allclose(g(ta).numpy(), want_sum, rtol=1e-4)
                np.testing.assert_allclose(h(tm).numpy(), want_mm, rtol=1e-4, atol=1e-3)
        except Exception as e:  # reported below, on the test's thread
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a launch never finished"
    assert not errors, errors[0]


def test_workers_that_never_spin_still_run_jobs():
    pool = SpinPool(get_jit(), 2, spins=0)   # (UG_LLVM_SPIN_US=0): asleep between jobs
    for _ in range(3):
        assert _run_once(pool, 2) == {1, 2}


def test_a_containers_cpu_quota_limits_the_threads(tmp_path, monkeypatch):
    from ug_llvm import cores

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert cores.cpu_quota(str(v2)) == 1.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cores.cpu_quota(str(v2)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cores.cpu_quota(str(v1)) == 2.0
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cores.cpu_quota(str(v1)) is None
    assert cores.cpu_quota(str(tmp_path / "none")) is None
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(8)))
    for quota, count in [(None, 8), (1.5, 2), (0.3, 1), (16.0, 8)]:
        monkeypatch.setattr(cores, "cpu_quota", lambda quota=quota: quota)
        assert cores.usable_cores() == count


def test_a_forked_child_gets_new_workers():
    """A forked child has only the forking thread: after_fork (which the core's fork handler
    calls through CPUDevice.after_fork) forgets the parent's workers, and the child's first
    post starts new ones, which run its jobs (before, a job was run by its poster alone)."""
    import os
    import pickle

    pool = SpinPool(get_jit(), 2, spins=64)
    assert _run_once(pool, 2) == {1, 2}
    time.sleep(0.05)   # the workers asleep on the condition: the child's copy of it is stale
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            pool.after_fork()
            seen = _run_once(pool, 2)
            names = sorted(t.name for t in threading.enumerate() if t.name.startswith("ug-cpu-"))
            os.write(write, pickle.dumps((seen, names)))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child's job never ran")
        time.sleep(0.01)
    with os.fdopen(read, "rb") as pipe:
        seen, names = pickle.loads(pipe.read())
    assert seen == {1, 2} and names == ["ug-cpu-1", "ug-cpu-2"], (seen, names)


_MARK_IR = """
define void @ug_test_pool_mark(ptr %mask, i64 %index) {
  %bit = shl i64 1, %index
  %old = atomicrmw or ptr %mask, i64 %bit seq_cst, align 8
  ret void
}
"""


def _native_mark(jit):
    """The address of `void mark(ptr mask, i64 index)`: *mask |= 1 << index (atomic)."""
    return jit.load(f'target triple = "{jit.triple}"\ntarget datalayout = "{jit.data_layout}"\n{_MARK_IR}',
                    "ug_test_pool_mark")


def _wait_mask(mask, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while mask[0] != want and time.monotonic() < deadline:
        time.sleep(0.001)
    return mask[0]


def test_native_jobs_run_on_the_workers_below_their_limit():
    """post_native: the workers run the native function themselves (spinning, and after they went
    to sleep), each under its own index, and only those below the job's limit."""
    import array

    jit = get_jit()
    mark = _native_mark(jit)
    pool = SpinPool(jit, 3, spins=64)
    for pause in (0.0, 0.05):   # right after the previous job (maybe spinning), then asleep
        time.sleep(pause)
        mask = array.array("q", [0])
        pool.post_native(mark, mask.buffer_info()[0], mask, 4)
        assert _wait_mask(mask, 0b1110) == 0b1110
    mask = array.array("q", [0])
    pool.post_native(mark, mask.buffer_info()[0], mask, 3)   # workers 1 and 2 only
    assert _wait_mask(mask, 0b110) == 0b110
    time.sleep(0.05)
    assert mask[0] == 0b110


def test_native_jobs_posted_faster_than_the_slots_turn_over():
    """Many native jobs in a row, more than there are slots, from two Python threads: a slot is
    reused only once no worker is inside its old job, so a worker reads each job whole. Jobs
    alternate between limits 2 (worker 1 only) and 3 (workers 1 and 2): a job's mask never gets a
    mark its own limit rules out (a worker that read one job's argument with another's limit would
    put one there), and the pool keeps every argument alive for whichever worker still reaches it."""
    import array

    jit = get_jit()
    mark = _native_mark(jit)
    pool = SpinPool(jit, 2)
    jobs = []

    def poster():
        for i in range(1000):
            mask, limit = array.array("q", [0]), 2 + i % 2
            jobs.append((mask, limit))
            pool.post_native(mark, mask.buffer_info()[0], mask, limit)
    threads = [threading.Thread(target=poster) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    time.sleep(0.05)
    assert all(mask[0] & ~0b110 == 0 for mask, _ in jobs)
    assert not [mask[0] for mask, limit in jobs if limit == 2 and mask[0] & 0b100]
    assert sum(1 for mask, _ in jobs if mask[0]) > 0   # the workers did take jobs


def test_threads_setting_caps_the_device_threads():
    import subprocess
    import sys
    code = "from ug_core.plugins import registry; print(registry.get('cpu').threads)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, UG_LLVM_THREADS="1"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "1"
