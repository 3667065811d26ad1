"""Fourier transforms in GPU memory (Device.fft for the kit's gpu targets): Stockham autosort
passes of radix 4 and 2, and Bluestein's algorithm for the lengths that are not powers of two.

A transform of a power-of-two length m is log4(m) passes of radix 4 (and one of radix 2 when
log2(m) is odd). Pass p with span s (1, then R, R R', ...: the length of the transforms already
done) runs one thread per group of R elements j, j + m/R, ..., j + (R-1) m/R of a row: it
multiplies element r by the twiddle w^(r (j mod s) m / (s R)) (w = exp(-+2 pi i / m)), does a
length-R DFT of the R values and writes them to (j div s) s R + (j mod s) + r s of the next
buffer (Stockham's autosort: the result is in natural order, no bit reversal pass). The passes
ping-pong between two scratch buffers; the first reads the source (through the spec's layout,
zero-padding, real input or the Hermitian half of a spectrum) and the last writes the output
(the norm's scale, the first n // 2 + 1 or the real parts), so a transform of one pass reads the
source and writes the output directly.

Another length n is Bluestein's chirp z-transform: with c[t] = exp(-+pi i t^2 / n) (t^2 taken
mod 2n, exactly), X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]), a circular convolution of length
m >= 2n - 1 (a power of two): the source times c, zero-padded to m, transformed forward; times
B = FFT_m(b) / m, where b holds conj(c[t]) at t and m - t (|t| < n); transformed back; the first
n of the result times c. Those multiplies happen in the first and last passes of the two
transforms, so a Bluestein transform is its two transforms' passes and nothing else.

Twiddles, chirp and B come from one table buffer per plan, computed on the host in float64 (t^2
mod 2n in integers) and rounded once to the transform's dtype: no sin/cos runs on the device,
and every factor is correctly rounded. Complex values are pairs of the dtype in every buffer (a
complex64 buffer is float32 pairs), so the programs need nothing complex from a renderer.

A row that fits a workgroup's shared memory (the device's KitDevice.fft_shared_bytes, by
default SHARED_BYTES: m <= 2048 complex64, 1024 complex128) runs every pass in one program
instead (`fused`): a workgroup per row, or per
several short rows, the first pass reading the source, the others the row in shared memory (a
pass's reads, a barrier, its writes, a barrier), the last writing the output: one launch, the
source read once and the output written once, no scratch.

Every program's parameters: the two scratch buffers (rows x m complex), the source, the
output and the table (see FftPlan.params); one compiled program per pass of a plan, or one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..specs import FftSpec
from ..loop_ir import BOOL, INDEX, Inst, LoopProgram, Opc, ParamSpec
from ..ops import Op
from ..view import prod
from .grid import GridProgram

SCRATCH0, SCRATCH1, SOURCE, OUT, TABLE = range(5)
"""Every program's parameters, in order."""

SOURCE_LOAD, SCRATCH_LOAD = "source", "scratch"
SCRATCH_STORE, FILTER_STORE, OUT_STORE = "scratch", "filter", "out"


@dataclass(frozen=True)
class FftPass:
    """One pass: radix R (1: a copy, for n = 1), span s, the exponent's sign, the buffers it
    reads and writes, and what its loads and stores do beyond moving values (SOURCE_LOAD: read
    the spec's source, times the chirp in a Bluestein plan; FILTER_STORE: times B, into scratch;
    OUT_STORE: the chirp, the scale and the output's layout)."""

    radix: int
    span: int
    sign: int
    src: int
    dst: int
    load: str
    store: str


@dataclass(frozen=True)
class FftPlan:
    """The shape of one transform on a gpu target: what its programs are built from."""

    spec: FftSpec
    m: int                   # the power-of-two length of the transforms run (n, or Bluestein's)
    bluestein: bool
    local: int               # threads per workgroup
    max_grid: tuple[int, ...]
    # a row fits a workgroup's shared memory: every pass in one program (tile_threads threads per
    # row, group_rows rows per workgroup); 0: one program per pass, through the scratch buffers
    tile_threads: int = 0
    group_rows: int = 1

    @property
    def fused(self) -> bool:
        return self.tile_threads > 0

    @property
    def table_size(self) -> int:
        """Complex entries of the table: twiddles (m), then for Bluestein the chirp (n) and B (m)."""
        return self.m + (self.spec.n + self.m if self.bluestein else 0)

    @property
    def scratch_size(self) -> int:
        """Elements (of the dtype) of each scratch buffer: rows x m complex pairs."""
        return 2 * self.spec.rows * self.m

    def params(self) -> tuple[ParamSpec, ...]:
        s, dt = self.spec, self.spec.dtype
        src = s.rows * s.n_in * (1 if s.real_in else 2)
        out = s.rows * s.n_out * (1 if s.real_out else 2)
        return (ParamSpec(dt, True, self.scratch_size), ParamSpec(dt, True, self.scratch_size),
                ParamSpec(dt, False, src), ParamSpec(dt, True, out), ParamSpec(dt, False, 2 * self.table_size))

    def passes(self) -> list[FftPass]:
        """The passes in launch order."""
        direct = not self.bluestein
        sign = 1 if self.spec.inverse else -1
        stages: list[tuple[int, int, str, str]] = []   # (radix, sign, load, store) per pass
        for transform in ((sign,) if direct else (-1, 1)):
            radices = _radices(self.m)
            for p, radix in enumerate(radices):
                last = p == len(radices) - 1
                load = SOURCE_LOAD if (p == 0 and (direct or transform == -1)) else SCRATCH_LOAD
                store = (OUT_STORE if direct or transform == 1 else FILTER_STORE) if last else SCRATCH_STORE
                stages.append((radix, transform, load, store))
        out: list[FftPass] = []
        spans: dict[int, int] = {}
        for i, (radix, transform, load, store) in enumerate(stages):
            span = spans.get(transform, 1)
            spans[transform] = span * radix
            src = SOURCE if load == SOURCE_LOAD else (SCRATCH0, SCRATCH1)[(i - 1) % 2]
            dst = OUT if store == OUT_STORE else (SCRATCH0, SCRATCH1)[i % 2]
            out.append(FftPass(radix, span, transform, src, dst, load, store))
        return out

    def scratch_buffers(self) -> int:
        """How many scratch buffers the passes use (0, 1 or 2; none when fused)."""
        return 0 if self.fused else len({p.dst for p in self.passes()} - {OUT})


SHARED_BYTES = 16384
"""The shared memory a fused transform may take per workgroup: Vulkan's guaranteed minimum of
maxComputeSharedMemorySize (CUDA's default is 48 KiB): rows of up to 2048 complex64 or 1024
complex128 run all their passes in one program."""


def plan(spec: FftSpec, local_size: int, max_grid: tuple[int, ...], shared_bytes: int = SHARED_BYTES) -> FftPlan:
    """The plan of a transform: the power-of-two length m (Bluestein's for other n), and whether
    its rows fit shared memory (`shared_bytes` per workgroup; 0: never), which runs every pass
    in one program, a workgroup per `group_rows` rows of `tile_threads` threads each."""
    n = spec.n
    bluestein = n & (n - 1) != 0
    m = 1 << (2 * n - 2).bit_length() if bluestein else n   # (the least power of two >= 2n - 1)
    local = max(1, local_size)
    row_bytes = 2 * m * spec.dtype.itemsize
    if local == 1 or row_bytes > shared_bytes or spec.rows == 0:
        return FftPlan(spec, m, bluestein, local, max_grid)
    widest = 1 << (local.bit_length() - 1)             # a power of two <= the workgroup size
    threads = min(widest, max(1, m // 4))             # (a radix-4 pass has m / 4 butterflies)
    rows = max(1, min(widest // threads, shared_bytes // row_bytes, spec.rows))
    return FftPlan(spec, m, bluestein, local, max_grid, threads, rows)


def _radices(m: int) -> list[int]:
    """Radix 2 first when log2(m) is odd, then 4s; [1] (a copy) for m = 1."""
    if m == 1:
        return [1]
    bits = m.bit_length() - 1
    return [2] * (bits % 2) + [4] * (bits // 2)


def table(p: FftPlan) -> np.ndarray:
    """The plan's table as pairs of its dtype: twiddles exp(-2 pi i t / m) for t < m; for
    Bluestein the chirp c[t] = exp(-+pi i (t^2 mod 2n) / n) for t < n and B = FFT_m(b) / m."""
    m, n = p.m, p.spec.n
    entries = [np.exp(-2j * np.pi * np.arange(m, dtype=np.float64) / m)]
    if p.bluestein:
        sign = 1 if p.spec.inverse else -1
        t = np.arange(n, dtype=np.int64)
        chirp = np.exp(sign * 1j * np.pi * ((t * t) % (2 * n)).astype(np.float64) / n)
        b = np.zeros(m, np.complex128)
        b[:n] = np.conj(chirp)
        b[m - n + 1:] = np.conj(chirp[1:])[::-1]
        entries += [chirp, np.fft.fft(b) / m]
    both = np.concatenate(entries)
    pairs = np.empty((both.size, 2), np.float64)
    pairs[:, 0], pairs[:, 1] = both.real, both.imag
    return pairs.astype(p.spec.dtype).reshape(-1)


def programs(p: FftPlan) -> list[LoopProgram]:
    """The programs in launch order: one per pass (FftPlan.passes), or the fused one."""
    if p.fused:
        return [_fused_program(p)]
    return [_pass_program(p, fp, i) for i, fp in enumerate(p.passes())]


# --- the programs ------------------------------------------------------------------------------

Complex = tuple[Inst, Inst]


class _Program(GridProgram):
    """A program under construction: `count` workgroups of `local` threads (the last ones past
    the end skipped), complex math."""

    def __init__(self, p: FftPlan, local: int, count: int):
        super().__init__(p.params(), count, local, p.max_grid)
        self.p = p
        self.dt = p.spec.dtype
        if prod(self.grid) != count:   # (uniform in a workgroup: the fused program's barriers may sit inside)
            self.guard(self.b.alu(Op.CMPLT, (self.group, self.b.const(count)), BOOL))

    # complex values: (re, im) pairs of the dtype
    def op(self, op: Op, x: Inst, y: Inst) -> Inst:
        return self.b.alu(op, (x, y), self.dt)

    def add(self, x: Complex, y: Complex) -> Complex:
        return self.op(Op.ADD, x[0], y[0]), self.op(Op.ADD, x[1], y[1])

    def sub(self, x: Complex, y: Complex) -> Complex:
        return self.op(Op.SUB, x[0], y[0]), self.op(Op.SUB, x[1], y[1])

    def mul(self, x: Complex, y: Complex) -> Complex:
        re = self.op(Op.SUB, self.op(Op.MUL, x[0], y[0]), self.op(Op.MUL, x[1], y[1]))
        im = self.op(Op.ADD, self.op(Op.MUL, x[0], y[1]), self.op(Op.MUL, x[1], y[0]))
        return re, im

    def times_i(self, x: Complex, sign: int) -> Complex:
        """x * (sign i): (-im, re) for +i, (im, -re) for -i."""
        neg = self.b.alu(Op.NEG, (x[1] if sign > 0 else x[0],), self.dt)
        return (neg, x[0]) if sign > 0 else (x[1], neg)

    def scaled(self, x: Complex, factor: float) -> Complex:
        if factor == 1.0:
            return x
        f = self.b.const(factor, self.dt)
        return self.op(Op.MUL, x[0], f), self.op(Op.MUL, x[1], f)

    def load_pair(self, param: int, at: Inst, gate: Inst | None = None) -> Complex:
        """Complex element `at` (an index of pairs) of a buffer."""
        b = self.b
        base = b.mul(at, 2)
        read_only = param in (SOURCE, TABLE)
        return (b.load(self.params[param], base, self.dt, read_only, gate),
                b.load(self.params[param], b.add(base, b.const(1)), self.dt, read_only, gate))

    def store_pair(self, param: int, at: Inst, value: Complex) -> None:
        b = self.b
        base = b.mul(at, 2)
        b.emit(Opc.STORE, None, (self.params[param], base, value[0]))
        b.emit(Opc.STORE, None, (self.params[param], b.add(base, b.const(1)), value[1]))

    def table_entry(self, at: Inst, conjugate: bool = False) -> Complex:
        re, im = self.load_pair(TABLE, at)
        return (re, self.b.alu(Op.NEG, (im,), self.dt)) if conjugate else (re, im)


def _pass_program(p: FftPlan, fp: FftPass, index: int) -> LoopProgram:
    """One pass through global memory: a thread per group of R elements of a row."""
    s, m, R = p.spec, p.m, fp.radix
    q = m // R
    inner = s.inner
    threads = s.rows * q
    local = max(1, min(p.local, threads))
    pr = _Program(p, local, -(-threads // local))
    b = pr.b
    tid = b.add(b.mul(pr.group, local), pr.lid)
    if local * -(-threads // local) != threads:   # (the last workgroup's tail)
        b.if_(b.alu(Op.CMPLT, (tid, b.const(threads)), BOOL))
    # thread -> (o, j, i) with i fastest: consecutive threads read consecutive elements
    i = b.mod(tid, inner)
    rest = b.idiv(tid, inner)
    j = b.mod(rest, q)
    o = b.idiv(rest, q)
    values = [_twiddled(pr, fp, j, r, _load(pr, fp, o, b.add(j, b.const(r * q)), i)) for r in range(R)]
    for r, value in enumerate(_dft(pr, values, fp.sign)):
        _store(pr, fp, o, _destination(pr, fp, j, r), i, value)
    if local * -(-threads // local) != threads:
        b.close()
    return pr.finish(f"fft_pass{index}_r{R}_s{fp.span}")


def _twiddled(pr: _Program, fp: FftPass, j: Inst, r: int, value: Complex) -> Complex:
    """Element r of butterfly j times its twiddle w^(r (j mod s) m / (s R)), exp(sign 2 pi i ...)."""
    if fp.span == 1 or r == 0:
        return value
    b, m = pr.b, pr.p.m
    k = b.mod(j, fp.span)
    return pr.mul(value, pr.table_entry(b.mul(k, r * (m // (fp.span * fp.radix))), conjugate=fp.sign > 0))


def _destination(pr: _Program, fp: FftPass, j: Inst, r: int) -> Inst:
    """Where output r of butterfly j goes: (j div s) s R + (j mod s) + r s (Stockham's order)."""
    b = pr.b
    first = b.add(b.mul(b.idiv(j, fp.span), fp.span * fp.radix), b.mod(j, fp.span))
    return b.add(first, b.const(r * fp.span))


def _fused_program(p: FftPlan) -> LoopProgram:
    """Every pass in one program: a workgroup takes group_rows rows, tile_threads threads each;
    the first pass reads the source, the others the row in shared memory (all of a pass's reads,
    a barrier, its writes, a barrier: Stockham in place), the last writes the output. A row past
    the end (the last workgroup's) reads the last row and stores nothing, so that every thread
    reaches every barrier."""
    s, m, T, G = p.spec, p.m, p.tile_threads, p.group_rows
    pr = _Program(p, G * T, -(-s.rows // G))
    b = pr.b
    t = b.mod(pr.lid, T)
    g = b.idiv(pr.lid, T)
    row = b.add(b.mul(pr.group, G), g)
    valid: Inst | None = None
    if -(-s.rows // G) * G != s.rows:
        valid = b.alu(Op.CMPLT, (row, b.const(s.rows)), BOOL)
        row = b.min(row, b.const(s.rows - 1))
    o, i = b.idiv(row, s.inner), b.mod(row, s.inner)
    shared = (b.emit(Opc.DEFINE_LOCAL, pr.dt, (), G * m), b.emit(Opc.DEFINE_LOCAL, pr.dt, (), G * m))
    base = b.mul(g, m)

    def read(at: Inst) -> Complex:
        where = b.add(base, at)
        return (b.emit(Opc.LOCAL_LOAD, pr.dt, (shared[0], where)), b.emit(Opc.LOCAL_LOAD, pr.dt, (shared[1], where)))

    def write(at: Inst, value: Complex) -> None:
        where = b.add(base, at)
        b.emit(Opc.LOCAL_STORE, None, (shared[0], where, value[0]))
        b.emit(Opc.LOCAL_STORE, None, (shared[1], where, value[1]))

    passes = p.passes()
    for index, fp in enumerate(passes):
        q = m // fp.radix
        butterflies = []
        for u in range(max(1, q // T)):   # (q >= T: each thread has q / T butterflies; m = 1: one)
            j = b.add(t, b.const(u * T)) if T > 1 else b.const(u)
            values = []
            for r in range(fp.radix):
                at = b.add(j, b.const(r * q))
                value = _load(pr, fp, o, at, i) if fp.load == SOURCE_LOAD else read(at)
                values.append(_twiddled(pr, fp, j, r, value))
            butterflies.append((j, values))
        if index > 0:
            b.emit(Opc.BARRIER, None)   # every read of the row done before it is overwritten
        for j, values in butterflies:
            for r, value in enumerate(_dft(pr, values, fp.sign)):
                at = _destination(pr, fp, j, r)
                if fp.store == OUT_STORE:
                    if valid is not None:
                        b.if_(valid)
                    _store(pr, fp, o, at, i, value)
                    if valid is not None:
                        b.close()
                elif fp.store == FILTER_STORE:
                    write(at, pr.mul(value, pr.table_entry(b.add(at, b.const(m + s.n)))))
                else:
                    write(at, value)
        if index < len(passes) - 1:
            b.emit(Opc.BARRIER, None)   # the row written before the next pass reads it
    return pr.finish(f"fft_fused_{m}")


def _dft(pr: _Program, v: list[Complex], sign: int) -> list[Complex]:
    """The length-R DFT of v (R = 1, 2, 4) with the exponent's sign."""
    if len(v) == 1:
        return v
    if len(v) == 2:
        return [pr.add(v[0], v[1]), pr.sub(v[0], v[1])]
    a0, a1 = pr.add(v[0], v[2]), pr.sub(v[0], v[2])
    a2, a3 = pr.add(v[1], v[3]), pr.times_i(pr.sub(v[1], v[3]), sign)
    return [pr.add(a0, a2), pr.add(a1, a3), pr.sub(a0, a2), pr.sub(a1, a3)]


def _load(pr: _Program, fp: FftPass, o: Inst, at: Inst, i: Inst) -> Complex:
    """Element `at` (< m) of row (o, i) of the pass's input."""
    p, b = pr.p, pr.b
    s = p.spec
    if fp.load == SCRATCH_LOAD:
        return pr.load_pair(fp.src, b.add(b.mul(b.add(b.mul(o, p.m), at), s.inner), i))
    zero = b.const(0.0, pr.dt)
    n = s.n
    # the position in the length-n input, its source element, and whether it is conjugated
    gates: list[Inst] = []
    if p.bluestein:
        gates.append(b.alu(Op.CMPLT, (at, b.const(n)), BOOL))
        at = b.min(at, b.const(n - 1))
    conjugate: Inst | None = None
    if s.onesided and s.real_out:   # a Hermitian half: position t > n // 2 reads conj(a[n - t])
        half = n // 2 + 1
        mirrored = b.alu(Op.CMPLT, (b.const(half - 1), at), BOOL)
        element = b.alu(Op.WHERE, (mirrored, b.alu(Op.SUB, (b.const(n), at), INDEX), at), INDEX)
        conjugate = mirrored
    else:
        element = at
    if s.n_in < s.n_used:   # zero padding
        gates.append(b.alu(Op.CMPLT, (element, b.const(s.n_in)), BOOL))
        element = b.min(element, b.const(s.n_in - 1))
    gate = gates[0] if gates else None
    if len(gates) == 2:
        gate = b.alu(Op.AND, (gates[0], gates[1]), BOOL)
    where = b.add(b.mul(b.add(b.mul(o, s.n_in), element), s.inner), i)
    if s.real_in:
        value: Complex = (b.load(pr.params[SOURCE], where, pr.dt, True, gate), zero)
    else:
        value = pr.load_pair(SOURCE, where, gate)
    if conjugate is not None:
        value = (value[0], b.alu(Op.WHERE, (conjugate, b.alu(Op.NEG, (value[1],), pr.dt), value[1]), pr.dt))
    if p.bluestein:
        value = pr.mul(value, pr.table_entry(b.add(at, b.const(p.m))))
    return value


def _store(pr: _Program, fp: FftPass, o: Inst, at: Inst, i: Inst, value: Complex) -> None:
    """Element `at` (< m) of row (o, i) of the pass's result."""
    p, b = pr.p, pr.b
    s = p.spec
    if fp.store == SCRATCH_STORE:
        pr.store_pair(fp.dst, b.add(b.mul(b.add(b.mul(o, p.m), at), s.inner), i), value)
        return
    if fp.store == FILTER_STORE:
        value = pr.mul(value, pr.table_entry(b.add(at, b.const(p.m + s.n))))
        pr.store_pair(fp.dst, b.add(b.mul(b.add(b.mul(o, p.m), at), s.inner), i), value)
        return
    # the output: the first n (Bluestein), the first n // 2 + 1 (a half spectrum)
    keep = s.n_out
    guarded = keep < p.m
    if guarded:
        b.if_(b.alu(Op.CMPLT, (at, b.const(keep)), BOOL))
    if p.bluestein:
        value = pr.mul(value, pr.table_entry(b.add(at, b.const(p.m))))
    value = pr.scaled(value, s.scale)
    where = b.add(b.mul(b.add(b.mul(o, s.n_out), at), s.inner), i)
    if s.real_out:
        b.emit(Opc.STORE, None, (pr.params[OUT], where, value[0]))
    else:
        pr.store_pair(OUT, where, value)
    if guarded:
        b.close()
