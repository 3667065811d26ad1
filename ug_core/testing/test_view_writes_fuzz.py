"""Differential fuzzing of writes and aliasing: random programs run on ug and replayed eagerly
in numpy, whose own view semantics are the oracle.

Each program starts from a few tensors of one dtype and takes random steps: views (basic
indexing with any steps, ints, None and ..., reshape, .T and permute, expand_dims, squeeze,
flip, diagonal, broadcast_to), copies (ug.tensor, +x, astype, flatten, pad, roll, concat,
stack, take, integer-array and boolean-mask indexing, sort, cumulative_sum, where, clip, and
the identity cases of each: a zero pad, a roll by the length, an empty scatter...), arithmetic,
writes through any tensor, base or view (scalars, tensors, the target itself read through
another view: reversed, shifted, transposed; integer-array and mask writes; in-place operators;
assign), realizations, reads and deletions. numpy runs the same steps on arrays, where the view
functions give numpy views (diagonal a writable one) and the rest new arrays; every read and,
at the end, every tensor must equal its array, and ug must call a result a view (TensorView)
exactly where numpy's shares memory with its source.

`UG_FUZZ_PROGRAMS` programs per device (default 2000) in one test, drawn from `UG_FUZZ_SEED`
(default fixed, so a CI run is repeatable; set it to explore): a failure names the seed and
prints the program, which `UG_FUZZ_SEED=<seed> UG_FUZZ_PROGRAMS=1` replays alone.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import ug_core as ug
from ug_core.tensor import TensorView

PROGRAMS = int(os.environ.get("UG_FUZZ_PROGRAMS", "2000"))
SEED = int(os.environ.get("UG_FUZZ_SEED", "20261127"))
DTYPES = ["float32", "int32", "int8", "uint8", "float64", "int64", "bool"]
SHAPES = [(4, 5), (3, 4), (2, 3, 4), (6,), (4, 4)]


class Program:
    """One random program, run step by step on ug and numpy side by side."""

    def __init__(self, device, seed, dtype):
        self.device, self.r, self.dtype = device, np.random.default_rng(seed), dtype
        self.ts: list = []     # ug tensors
        self.es: list = []     # numpy arrays (views where ug's are views)
        self.log = []

    # --- values ------------------------------------------------------------------------
    def data(self, shape):
        r, dt = self.r, self.dtype
        if dt.kind == "b":
            return r.random(shape) < 0.5
        if dt.kind == "f":
            return r.integers(-8, 8, shape).astype(dt) / 2   # exact in every float dtype
        info = np.iinfo(dt)
        return r.integers(max(info.min, -50), min(info.max, 50) + 1, shape).astype(dt)

    def scalar(self):
        """A Python scalar the dtype holds: mostly small, sometimes at the dtype's extremes (and
        for float64 values float32 cannot hold)."""
        dt = self.dtype
        if self.r.random() < 0.2 and dt.kind != "b":
            if dt.kind in "iu":
                info = np.iinfo(dt)
                return int(self.r.choice([info.min, info.max, info.min + 1, info.max - 1]))
            extremes = [-0.0, float(np.finfo(dt).max), float(np.finfo(dt).tiny), float(np.finfo(dt).eps)]
            if dt == np.float64:
                extremes += [0.1 + 2.0 ** -40, 2.0 ** 60 + 2.0 ** 8, 1e300]
            return float(self.r.choice(extremes))
        v = self.data(())
        return v.item()

    def add(self, t, e, text):
        if not isinstance(e, np.ndarray):  # numpy gives scalars for some 0-d results (copies)
            e = np.array(e)
        self.ts.append(t)
        self.es.append(e)
        self.log.append(f"t{len(self.ts) - 1} = {text}")

    def pick(self, min_ndim=0):
        choices = [k for k, e in enumerate(self.es) if e.ndim >= min_ndim]
        return int(self.r.choice(choices)) if choices else None

    # --- basic indices ----------------------------------------------------------------
    def basic_index(self, shape):
        r, items = self.r, []
        for n in shape:
            kind = r.integers(0, 5)
            if kind == 0 and n:
                items.append(int(r.integers(-n, n)))
            elif kind == 1:
                items.append(slice(None))
            else:
                step = int(r.choice([1, 1, 2, -1, -2, 3]))
                a, b = sorted(int(v) for v in r.integers(0, n + 1, 2))
                items.append(slice(a, b, step) if step > 0 else slice(b - 1 if b else None, a - 1 if a else None, step))
        if r.random() < 0.15:
            items.insert(int(r.integers(0, len(items) + 1)), None)
        if r.random() < 0.15 and items:
            cut = int(r.integers(0, len(items)))
            items = items[:cut] + [Ellipsis]
        return tuple(items)

    # --- steps ----------------------------------------------------------------------
    def step(self):
        kind = self.r.choice(["view", "view", "view", "copy", "copy", "arith", "write", "write", "write",
                              "write", "write", "write", "realize", "read", "delete"])
        getattr(self, f"step_{kind}")()

    def step_view(self):
        i = self.pick()
        t, e = self.ts[i], self.es[i]
        r = self.r
        options = ["index", "reshape", "permute", "expand", "flip"]
        if e.ndim >= 2:
            options += ["T", "diagonal"]
        if 1 in e.shape:
            options.append("squeeze")
        how = r.choice(options + ["broadcast"])
        if how == "index":
            idx = self.basic_index(e.shape)
            u, v, text = t[idx], e[idx], f"t{i}[{_fmt(idx)}]"
            if not isinstance(v, np.ndarray):   # numpy: an integer per dimension gives a scalar
                v = np.array(v)
        elif how == "reshape":
            shapes = [(-1,), (e.size,), e.shape[::-1]] + ([(2, -1)] if e.size % 2 == 0 and e.size else [])
            shape = shapes[int(r.integers(0, len(shapes)))]
            if np.prod([s for s in shape if s != -1]) and e.size % abs(int(np.prod(shape))) and -1 not in shape:
                return
            try:
                v = e.reshape(shape)
            except ValueError:
                return
            u, text = t.reshape(shape), f"t{i}.reshape({shape})"
        elif how == "permute":
            perm = tuple(int(a) for a in r.permutation(e.ndim))
            u, v, text = t.permute(perm), e.transpose(perm), f"t{i}.permute({perm})"
        elif how == "T":
            u, v, text = t.T, e.T, f"t{i}.T"
        elif how == "expand":
            ax = int(r.integers(0, e.ndim + 1))
            u, v, text = ug.expand_dims(t, axis=ax), np.expand_dims(e, ax), f"expand_dims(t{i}, {ax})"
        elif how == "squeeze":
            ax = e.shape.index(1)
            u, v, text = ug.squeeze(t, axis=ax), np.squeeze(e, ax), f"squeeze(t{i}, {ax})"
        elif how == "flip":
            ax = int(r.integers(0, e.ndim)) if e.ndim and r.random() < 0.7 else None
            u, v, text = ug.flip(t, axis=ax), np.flip(e, ax), f"flip(t{i}, axis={ax})"
        elif how == "diagonal":
            off = int(r.integers(-1, 2))
            u, text = ug.linalg.diagonal(t, offset=off), f"linalg.diagonal(t{i}, offset={off})"
            d = np.diagonal(e, off, -2, -1)     # read-only in numpy: the same elements, writable
            v = np.lib.stride_tricks.as_strided(e[(..., slice(max(-off, 0), None), slice(max(off, 0), None))],
                                                d.shape, d.strides) if d.size else d.copy()
        else:
            shape = (2,) + e.shape
            u, v, text = t.broadcast_to(shape), np.broadcast_to(e, shape), f"t{i}.broadcast_to({shape})"
        self.add(u, v, text)
        self.check_aliasing(u, self.es[-1], t, e, text)

    def check_aliasing(self, u, v, t, source, text):
        """ug's result is a view of t's elements exactly where numpy's shares memory with its source."""
        numpy_view = v.size > 0 and np.shares_memory(v, source)
        root = t.base if isinstance(t, TensorView) else t
        ug_view = isinstance(u, TensorView) and u.base is root
        if v.size and numpy_view != ug_view:
            raise AssertionError(f"{text}: numpy gives a {'view' if numpy_view else 'copy'}, ug a "
                                 f"{'view' if ug_view else 'new value'}")

    def step_copy(self):
        i = self.pick()
        t, e, r, dev = self.ts[i], self.es[i], self.r, self.device
        options = ["tensor", "pos", "astype", "flatten", "where", "asarray_copy"]
        if e.ndim:
            options += ["pad0", "pad", "roll_n", "roll", "concat1", "stack0", "take", "mask", "int_index",
                        "cumsum", "scatter_empty", "tile1", "clip", "scatter_add", "index_add"]
            if e.dtype.kind != "b":
                options.append("sort")
        how = r.choice(options)
        if how == "tensor":
            u, v, text = ug.tensor(t), e.copy(), f"ug.tensor(t{i})"
        elif how == "asarray_copy":
            u, v, text = ug.asarray(t, copy=True), e.copy(), f"asarray(t{i}, copy=True)"
        elif how == "pos":
            if e.dtype.kind == "b":
                return
            u, v, text = +t, +e, f"+t{i}"
        elif how == "astype":
            u, v, text = t.astype(e.dtype), e.astype(e.dtype), f"t{i}.astype(same)"
        elif how == "flatten":
            u, v, text = t.flatten(), e.flatten(), f"t{i}.flatten()"
        elif how == "where":
            m = r.random(e.shape) < 0.5
            u, v, text = ug.where(ug.tensor(m, device=dev), t, t), np.where(m, e, e), f"where(m, t{i}, t{i})"
        elif how in ("pad0", "pad"):
            w = 0 if how == "pad0" else int(r.integers(1, 3))
            mode = str(r.choice(["constant", "edge", "reflect"])) if e.shape and min(e.shape) > w else "constant"
            u, v, text = ug.pad(t, w, mode=mode), np.pad(e, w, mode=mode), f"pad(t{i}, {w}, mode={mode!r})"
        elif how in ("roll_n", "roll"):
            ax = int(r.integers(0, e.ndim))
            shift = e.shape[ax] * int(r.integers(-2, 3)) if how == "roll_n" else int(r.integers(-7, 8))
            u, v, text = ug.roll(t, shift, axis=ax), np.roll(e, shift, ax), f"roll(t{i}, {shift}, axis={ax})"
        elif how == "concat1":
            u, v, text = ug.concat([t]), np.concatenate([e]), f"concat([t{i}])"
        elif how == "stack0":
            u, v, text = ug.stack([t])[0], np.stack([e])[0], f"stack([t{i}])[0]"
        elif how == "take":
            n = e.shape[0]
            if not n:
                return
            idx = r.integers(0, n, int(r.integers(0, 4)))
            u, v, text = ug.take(t, ug.tensor(idx, device=dev), axis=0), np.take(e, idx, 0), f"take(t{i}, {idx.tolist()})"
        elif how == "int_index":
            n = e.shape[0]
            if not n:
                return
            idx = r.integers(0, n, int(r.integers(1, 4)))
            u, v, text = t[idx], e[idx], f"t{i}[{idx.tolist()}]"
        elif how == "mask":
            m = r.random(e.shape) < 0.5
            u, v, text = t[m], e[m], f"t{i}[mask]"
        elif how == "cumsum":
            if e.dtype.kind == "b":
                return
            ax = int(r.integers(0, e.ndim))
            u = ug.cumulative_sum(t, axis=ax, dtype=e.dtype)
            v, text = np.cumsum(e, ax, dtype=e.dtype), f"cumulative_sum(t{i}, axis={ax})"
        elif how == "sort":
            ax = int(r.integers(0, e.ndim))
            u, v, text = ug.sort(t, axis=ax), np.sort(e, ax, kind="stable"), f"sort(t{i}, axis={ax})"
        elif how == "scatter_empty":
            if e.ndim != 1 or e.dtype.kind == "b":
                return
            u = ug.scatter_add(t, 0, ug.tensor(np.zeros(0, np.int64), device=dev), ug.zeros((0,), dtype=e.dtype, device=dev))
            v, text = e.copy(), f"scatter_add(t{i}, empty)"
        elif how in ("scatter_add", "index_add"):
            if e.dtype.kind == "b" or not e.shape[0]:
                return
            n = int(r.integers(1, 5))
            idx = r.integers(0, e.shape[0], n)
            src = self.data((n,) + e.shape[1:])
            v = e.copy()
            np.add.at(v, idx, src)
            if how == "index_add":
                u = ug.index_add(t, 0, ug.tensor(idx, device=dev), ug.tensor(src, device=dev))
            else:
                full = idx.reshape((n,) + (1,) * (e.ndim - 1)) * np.ones((1,) + e.shape[1:], np.int64)
                u = ug.scatter_add(t, 0, ug.tensor(full, device=dev), ug.tensor(src, device=dev))
            text = f"{how}(t{i}, 0, {idx.tolist()}, <array>)"
        elif how == "tile1":
            u, v, text = ug.tile(t, (1,) * e.ndim), np.tile(e, (1,) * e.ndim), f"tile(t{i}, ones)"
        else:
            if e.dtype.kind == "b":
                return
            u, v, text = ug.clip(t, None, None), np.clip(e, None, None), f"clip(t{i}, None, None)"
        # (ug's new values are row-major: numpy's keep their source's layout (order='K'), so
        # that a reshape of a transposed one would copy where ug's is a view)
        self.add(u, v if np.asarray(v).flags.c_contiguous else v.copy(order="C"), text)
        self.check_aliasing(u, self.es[-1], t, e, text)

    def step_arith(self):
        i = self.pick()
        t, e = self.ts[i], self.es[i]
        if e.dtype.kind == "b":
            u, v, text = t ^ True, e ^ True, f"t{i} ^ True"
        elif self.r.random() < 0.5:
            c = self.scalar()
            u, v, text = t + c, e + e.dtype.type(c), f"t{i} + {c!r}"
        else:
            j = self.pick()
            if self.es[j].shape != e.shape:
                return
            u, v, text = t * self.ts[j], e * self.es[j], f"t{i} * t{j}"
        # (ug's new values are row-major: numpy's keep their source's layout (order='K'), so
        # that a reshape of a transposed one would copy where ug's is a view)
        self.add(u, v if np.asarray(v).flags.c_contiguous else v.copy(order="C"), text)

    def step_write(self):
        i = self.pick()
        t, e, r, dev = self.ts[i], self.es[i], self.r, self.device
        how = r.choice(["scalar", "tensor", "self", "self", "iadd", "assign", "ints", "mask"])
        readonly = not e.flags.writeable
        text = ""
        try:
            if how in ("scalar", "tensor", "self"):
                idx = self.basic_index(e.shape) if r.random() < 0.8 else (Ellipsis,)
                region = e[idx]
                shape = np.shape(region)
                if how == "scalar":
                    c = self.scalar()
                    text = f"t{i}[{_fmt(idx)}] = {c!r}"
                    e[idx] = c  # numpy first: raises for a read-only one
                    t[idx] = c
                elif how == "tensor":
                    a = self.data(shape)
                    text = f"t{i}[{_fmt(idx)}] = <array {a.tolist()}>"
                    e[idx] = a
                    t[idx] = ug.tensor(a, device=dev)
                else:   # the target read through another view of itself, of the region's shape
                    other = self.self_view(e.shape, shape)
                    if other is None:
                        return
                    text = f"t{i}[{_fmt(idx)}] = t{i}[{_fmt(other)}]"
                    e[idx] = e[other].copy()
                    t[idx] = t[other]
            elif how == "iadd":
                if e.dtype.kind == "b":
                    return
                text = f"t{i} += 1"
                if readonly:
                    e += 1   # raises
                e += e.dtype.type(1)
                t += 1
            elif how == "assign":
                a = self.data(e.shape)
                text = f"t{i}.assign(<array {a.tolist()}>)"
                e[...] = a
                t.assign(ug.tensor(a, device=dev))
            elif how == "ints":
                if not e.ndim or not e.shape[0]:
                    return
                idx = r.integers(0, e.shape[0], int(r.integers(1, 4)))
                c = self.scalar()
                text = f"t{i}[{idx.tolist()}] = {c!r}"
                e[idx] = c
                t[ug.tensor(idx, device=dev)] = c
            else:
                m = r.random(e.shape) < 0.4
                c = self.scalar()
                text = f"t{i}[mask] = {c!r}"
                e[m] = c
                t[m] = c
        except ValueError as err:
            if not readonly:
                raise
            self.log.append(f"{text}  # read-only: {err}")
            with pytest.raises(ValueError, match="read-only"):
                _ug_write(t, how, r)
            return
        assert not readonly, f"{text}: numpy raised nothing for a read-only array"
        self.log.append(text)

    def self_view(self, shape, region):
        """A basic index into an array of `shape` that selects an array of the `region` shape
        (the target read through another view of itself: reversed, shifted...), or None."""
        probe = np.empty(shape)
        candidates = [(Ellipsis,), tuple(slice(None, None, -1) for _ in shape)]
        candidates += [self.basic_index(shape) for _ in range(12)]
        for idx in candidates:
            if probe[idx].shape == region:
                return idx
        if len(region) == 2 and region[0] == region[1] and probe.ndim == 2 and shape == region:
            return None
        return None

    def step_realize(self):
        chosen = [int(k) for k in self.r.integers(0, len(self.ts), int(self.r.integers(1, 4)))]
        self.log.append(f"ug.realize({', '.join(f't{k}' for k in chosen)})")
        ug.realize(*[self.ts[k] for k in chosen])

    def step_read(self):
        i = self.pick()
        self.log.append(f"read t{i}")
        self.compare(i)

    def step_delete(self):
        if len(self.ts) > 1:
            i = self.pick()
            self.log.append(f"del t{i}")
            self.ts[i] = self.es[i] = None
            self.ts = [t for t in self.ts if t is not None]
            self.es = [e for e in self.es if e is not None]
            self.log.append("(renumbered)")

    def compare(self, i):
        got, want = self.ts[i].numpy(), self.es[i]
        assert got.shape == want.shape and got.dtype == want.dtype, (i, got.shape, want.shape, got.dtype, want.dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"t{i}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"t{i}")

    def run(self, steps):
        for shape in self.r.permutation(len(SHAPES))[:2]:
            a = self.data(SHAPES[shape])
            self.add(ug.tensor(a, device=self.device), a.copy(), f"tensor(<{a.dtype} {a.shape}>)")
        for _ in range(steps):
            self.step()
        if self.r.random() < 0.5:
            ug.realize(*self.ts)
            self.log.append("ug.realize(all)")
        for k in range(len(self.ts)):
            self.compare(k)


def _ug_write(t, how, r):
    """Write a read-only tensor the way the numpy side tried (it must raise ValueError)."""
    if how == "iadd":
        t += 1
    elif how == "assign":
        t.assign(ug.zeros(t.shape, dtype=t.dtype, device=t.device))
    else:
        t[(0,) * t.ndim] = 0


def _fmt(idx):
    def one(i):
        if i is None:
            return "None"
        if i is Ellipsis:
            return "..."
        if isinstance(i, slice):
            return ":".join("" if v is None else str(v) for v in (i.start, i.stop)) + (f":{i.step}" if i.step else "")
        return str(i)
    return ", ".join(one(i) for i in idx)


def test_writes_through_views_match_eager_numpy(device):
    dev = ug.registry.get(device)
    dtypes = [np.dtype(d) for d in DTYPES if np.dtype(d) in dev.dtypes]
    for n in range(PROGRAMS):
        seed = SEED + n
        r = np.random.default_rng(seed)
        program = Program(device, seed, dtypes[int(r.integers(0, len(dtypes)))])
        try:
            program.run(int(r.integers(3, 14)))
        except Exception as err:   # name the program, then fail
            text = "\n  ".join(program.log)
            raise AssertionError(f"program {n} (UG_FUZZ_SEED={seed} UG_FUZZ_PROGRAMS=1), dtype "
                                 f"{program.dtype}:\n  {text}\n{type(err).__name__}: {err}") from err


def test_program_writing_a_realized_view_back(device):
    """A program the fuzz found (seed 20261494, bool): a view that was realized (a VIEW node with
    no sources left) written into a region of a tensor raised IndexError instead of writing."""
    if np.dtype(bool) not in ug.registry.get(device).dtypes:
        pytest.skip(f"{device} has no bool")
    program = Program(device, 20261494, np.dtype(bool))
    program.run(13)
