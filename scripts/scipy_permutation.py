"""SciPy's permutation_test on ug tensors beside numpy, in one process (issue 27).

    SCIPY_ARRAY_API=1 python scripts/scipy_permutation.py [--cold] [--repeat 3] [--profile] [--cases N:VEC:BATCH,...]

(scipy takes only vectorized statistics from array libraries other than numpy: VEC is 1)

scipy builds one small lazy piece per resample (batch=1) and needs a result at the end, so the
scheduler sees one graph of thousands of nodes. Each case runs numpy and ug alternately,
`--repeat` times, and prints the medians and their ratio. `--cold` points ug's disk caches at
a fresh temporary directory (XDG_CACHE_HOME, read on every use) before the first ug call, so
the first ug run compiles what it needs; the medians are of the later (warm) runs, the first
run is printed apart. `--profile` prints cProfile's top entries for one ug run of the first case (a warm run
after one unprofiled run; with `--cold`, the first run).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402


def _statistic(x, y, axis=-1):
    xp = x.__array_namespace__() if hasattr(x, "__array_namespace__") else np
    return xp.mean(x, axis=axis) - xp.mean(y, axis=axis)


def _statistic_scalar(x, y):
    xp = x.__array_namespace__() if hasattr(x, "__array_namespace__") else np
    return xp.mean(x) - xp.mean(y)


def _run(xp_data, n_resamples: int, vectorized: bool, batch: int | None) -> float:
    from scipy import stats
    x, y = xp_data
    stat = _statistic if vectorized else _statistic_scalar
    res = stats.permutation_test((x, y), stat, n_resamples=n_resamples, vectorized=vectorized, batch=batch,
                                 rng=np.random.default_rng(0))
    return float(res.pvalue), float(res.statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--n", type=int, nargs=2, default=(60, 150))
    ap.add_argument("--cases", default="999:1:1,9999:1:1,999:1:None")
    args = ap.parse_args()
    if args.cold:
        tmp = tempfile.mkdtemp(prefix="ug-cold-")
        os.environ["XDG_CACHE_HOME"] = tmp
        for k in list(os.environ):
            if k.startswith("UG_") and k.endswith("CACHE_DIR"):
                del os.environ[k]
        print(f"cold disk cache: {tmp}")
    import ug_core as ug
    rng = np.random.default_rng(1)
    a = rng.normal(size=args.n[0])
    b = rng.normal(loc=0.3, size=args.n[1])
    npd = (a, b)
    ugd = (ug.asarray(a, device="cpu"), ug.asarray(b, device="cpu"))
    cases = []
    for c in args.cases.split(","):
        n, v, bt = c.split(":")
        cases.append((int(n), v == "1", None if bt == "None" else int(bt)))
    if args.profile:
        n, v, bt = cases[0]
        if not args.cold:
            _run(ugd, n, v, bt)  # warm: scipy imported, kernels compiled and cached; --cold profiles the first run
        pr = cProfile.Profile()
        pr.enable()
        _run(ugd, n, v, bt)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
        return
    # wall seconds, and the process's CPU seconds (on a loaded machine the fairer comparison)
    print(f"{'case':28s} {'numpy s':>8s} {'ug s':>8s} {'ratio':>6s} {'np cpu':>8s} {'ug cpu':>8s} {'ratio':>6s}"
          f" {'ug 1st s':>9s} {'1st cpu':>8s}")
    for n, v, bt in cases:
        tn, tu, cn, cu = [], [], [], []
        first = first_cpu = 0.0
        for r in range(args.repeat + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            rn = _run(npd, n, v, bt)
            t1, c1 = time.perf_counter(), time.process_time()
            ru = _run(ugd, n, v, bt)
            t2, c2 = time.perf_counter(), time.process_time()
            if not (np.isclose(rn[0], ru[0]) and np.isclose(rn[1], ru[1])):
                sys.exit(f"results differ: numpy {rn} ug {ru}")
            if r == 0:
                first, first_cpu = t2 - t1, c2 - c1
                continue
            tn.append(t1 - t0)
            tu.append(t2 - t1)
            cn.append(c1 - c0)
            cu.append(c2 - c1)
        mn, mu = statistics.median(tn), statistics.median(tu)
        qn, qu = statistics.median(cn), statistics.median(cu)
        name = f"n={n} batch={bt}"
        print(f"{name:28s} {mn:8.3f} {mu:8.3f} {mu / mn:6.1f} {qn:8.3f} {qu:8.3f} {qu / qn:6.1f} {first:9.3f} {first_cpu:8.3f}",
              flush=True)


if __name__ == "__main__":
    main()
