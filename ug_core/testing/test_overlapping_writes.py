"""Writes that read their own target (issue 23): `x[::-1] = x`, `x[1:] = x[:-1]`, `a[:] = a.T`,
a gather or a reduction of x written into x... give numpy's result (numpy copies an overlapping
right-hand side first), on every device, lazily (several writes in one schedule, where each write
may go in place into the buffer the one before wrote) and under ug.jit, replayed.

The scheduler writes in place only where each element written reads the target at that element
alone (schedule._misaligned_in_place); else the value goes through a buffer of its own, or the
write into a fresh one. Each case's right-hand sides are read at once, never held across a write:
the cases mean the same under value semantics and under numpy's views.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import ug_core as ug

IDX = np.array([3, 0, 5, 1])


class NP:
    """numpy's spelling of what the cases do (the oracle, run eagerly)."""
    flip, roll, concat, take, sort, where = np.flip, np.roll, np.concat, np.take, np.sort, np.where
    cumulative_sum = np.cumulative_sum

    @staticmethod
    def pad(x: np.ndarray, width: int) -> np.ndarray:
        return np.pad(x, width)

    @staticmethod
    def scatter_add(x: np.ndarray, idx: np.ndarray, v: Any) -> np.ndarray:
        out = x.copy()
        np.add.at(out, idx, v)
        return out

    @staticmethod
    def assign(x: np.ndarray, v: Any) -> None:
        x[...] = v


class UG:
    flip, roll, concat, take, sort, where = ug.flip, ug.roll, ug.concat, ug.take, ug.sort, ug.where
    cumulative_sum = ug.cumulative_sum

    @staticmethod
    def pad(x: ug.Tensor, width: int) -> ug.Tensor:
        return ug.pad(x, (width, width))

    @staticmethod
    def scatter_add(x: ug.Tensor, idx: np.ndarray, v: Any) -> ug.Tensor:
        return ug.scatter_add(x, 0, idx, v)

    @staticmethod
    def assign(x: ug.Tensor, v: Any) -> None:
        x.assign(v)


Case = Callable[[Any, Any], None]
CASES_1D: dict[str, Case] = {}   # cases on a tensor of shape (6,), called with (x, NP or UG)
CASES_2D: dict[str, Case] = {}   # on (4, 4)


def case_1d(f: Case) -> Case:
    CASES_1D[f.__name__] = f
    return f


def case_2d(f: Case) -> Case:
    CASES_2D[f.__name__] = f
    return f


@case_1d
def reverse(x: Any, m: Any) -> None:
    x[::-1] = x


@case_1d
def write_then_reverse(x: Any, m: Any) -> None:   # the issue's case
    x[0] = 10
    x[::-1] = x


@case_1d
def reverse_twice(x: Any, m: Any) -> None:
    x[0] = 10
    x[::-1] = x
    x[::-1] = x + 1


@case_1d
def shift_right(x: Any, m: Any) -> None:
    x[1:] = x[:-1]


@case_1d
def shift_left(x: Any, m: Any) -> None:
    x[:-1] = x[1:]


@case_1d
def shift_right_computed(x: Any, m: Any) -> None:
    x[2] = 7
    x[1:] = x[:-1] * 2 + 1


@case_1d
def shift_there_and_back(x: Any, m: Any) -> None:
    x[0] = 7
    x[1:] = x[:-1]
    x[:-1] = x[1:]


@case_1d
def odd_from_even(x: Any, m: Any) -> None:
    x[1] = 9
    x[::2] = x[1::2]


@case_1d
def strided_sum(x: Any, m: Any) -> None:
    x[4] = 9
    x[1::2] = x[::2] + x[1::2]


@case_1d
def partial_overlap(x: Any, m: Any) -> None:
    x[1] = 8
    x[2:5] = x[1:4]


@case_1d
def partial_overlap_reversed(x: Any, m: Any) -> None:
    x[4] = 8
    x[1:4] = x[4:1:-1]


@case_1d
def assign_reversed(x: Any, m: Any) -> None:
    x[0] = 3
    m.assign(x, x[::-1] * 2)


@case_1d
def assign_flip(x: Any, m: Any) -> None:
    x[5] = 3
    m.assign(x, m.flip(x))


@case_1d
def assign_roll(x: Any, m: Any) -> None:
    x[5] = 3
    m.assign(x, m.roll(x, 2))


@case_1d
def assign_concat(x: Any, m: Any) -> None:
    x[1] = 3
    m.assign(x, m.concat([x[3:], x[:3]]))


@case_1d
def gather(x: Any, m: Any) -> None:
    x[:4] = x[IDX]


@case_1d
def write_then_gather(x: Any, m: Any) -> None:
    x[0] = 11
    x[2:] = x[IDX]


@case_1d
def take(x: Any, m: Any) -> None:
    x[3] = 11
    x[2:] = m.take(x, IDX)


@case_1d
def reduction(x: Any, m: Any) -> None:
    x[1:] = x[1:] - x.max()


@case_1d
def write_then_reduction(x: Any, m: Any) -> None:
    x[0] = 9
    x[:] = x - x.min()


@case_1d
def scatter_of_self(x: Any, m: Any) -> None:
    x[2] = 4
    x[IDX] = x[::-1][:4]


@case_1d
def scatter_of_gather(x: Any, m: Any) -> None:
    x[1] = 4
    x[IDX] = x[IDX[::-1]] + 1


@case_1d
def scatter_add_of_self(x: Any, m: Any) -> None:
    x[5] = 2
    m.assign(x, m.scatter_add(x, IDX, x[::-1][:4]))


@case_1d
def cumulative_sum(x: Any, m: Any) -> None:   # a scan: a kernel of its own, read by the write
    x[0] = 10
    x[1:] = m.cumulative_sum(x)[:-1]


@case_1d
def sorted_reversed(x: Any, m: Any) -> None:
    x[2] = 3
    x[::-1] = m.sort(x)


@case_1d
def where_reversed(x: Any, m: Any) -> None:
    x[1] = 7
    x[:] = m.where(x > 3, x[::-1], x)


@case_1d
def padded_shift(x: Any, m: Any) -> None:
    x[0] = -1
    x[1:-1] = m.pad(x, 1)[:-4]


@case_1d
def lazy_reader_then_writes(x: Any, m: Any) -> None:
    y = x[::-1] * 3 + 0     # arithmetic: a copy (also under numpy), read after the writes below
    x[0] = 5
    x[1:] = x[:-1]
    x[:] = y + x


@case_2d
def flip_columns_there_and_back(a: Any, m: Any) -> None:   # the issue's int8 case
    a[:, :] = a[:, ::-1]
    a[:, ::-1] = a[:, :]


@case_2d
def write_then_flip_columns(a: Any, m: Any) -> None:
    a[0, 0] = 100
    a[:, ::-1] = a


@case_2d
def write_then_flip_both(a: Any, m: Any) -> None:
    a[3, 3] = 77
    a[::-1, ::-1] = a


@case_2d
def transpose(a: Any, m: Any) -> None:
    a[:] = a.T


@case_2d
def write_then_transpose(a: Any, m: Any) -> None:
    a[0, 1] = 50
    a[:] = a.T


@case_2d
def transposed_shift(a: Any, m: Any) -> None:
    a[2, 0] = 50
    a[1:] = a.T[:-1] + 1


@case_2d
def row_shift(a: Any, m: Any) -> None:
    a[0] = 3
    a[1:] = a[:-1]


@case_2d
def column_shift(a: Any, m: Any) -> None:
    a[1, 0] = 3
    a[:, 1:] = a[:, :-1]


@case_2d
def block_overlap(a: Any, m: Any) -> None:
    a[1, 1] = 60
    a[1:3, 1:3] = a[0:2, 0:2]
    a[0:2, 1:3] = a[1:3, 0:2].T


@case_2d
def row_sums_into_a_column(a: Any, m: Any) -> None:
    a[0, 2] = 1
    a[:, 0] = a.sum(axis=1)


@case_2d
def column_max_into_a_row(a: Any, m: Any) -> None:
    a[3, 1] = 90
    a[0] = a.max(axis=0)


@case_2d
def rows_from_rows(a: Any, m: Any) -> None:
    a[0] = 1
    a[1] = a[0] + a[2]


@case_2d
def diagonal_stride(a: Any, m: Any) -> None:
    a[0, 0] = 5
    m.assign(a, a - a.reshape(16)[::5].reshape(4, 1))


@case_2d
def matmul_of_self(a: Any, m: Any) -> None:
    a[1, 2] = 2
    m.assign(a, a @ a)


@case_2d
def matmul_into_right_operand(a: Any, m: Any) -> None:
    m.assign(a, a[::-1] @ a)


DTYPES = [np.float32, np.float64, np.int8]


def _start(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return (np.arange(int(np.prod(shape))) % 7 - 2).reshape(shape).astype(dtype)


FLOAT_ONLY = {"matmul_of_self", "matmul_into_right_operand"}   # (a matmul of int8 is another test's matter)


def _cases(dtypes: list[Any] | None = None) -> list[Any]:
    """(case, shape[, dtype]) parameters: every case, of each of `dtypes` it applies to."""
    out = []
    for dims, shape, cases in (("1d", (6,), CASES_1D), ("2d", (4, 4), CASES_2D)):
        for name, case in cases.items():
            if dtypes is None:
                out.append(pytest.param(case, shape, id=f"{dims}-{name}"))
            else:
                out += [pytest.param(case, shape, dt, id=f"{dims}-{name}-{np.dtype(dt).name}") for dt in dtypes
                        if np.dtype(dt).kind == "f" or name not in FLOAT_ONLY]
    return out


class _CopyFirst(np.ndarray):
    """An ndarray whose `a[i] = v` copies v first. numpy's own assignment does not always: it
    may run an overlapping copy in an order that reads what it wrote (numpy 2.4:
    `x[4::-2] = x[2::-1]` of arange(7) sets x[4] from the new x[2]); the semantics ug
    implements, and the issue's, are a copy's."""

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, np.array(value, copy=True))


def _expected(case: Case, start: np.ndarray, times: int) -> np.ndarray:
    e = start.copy().view(_CopyFirst)
    with np.errstate(over="ignore"):  # int8 sums wrap, as ug's do
        for _ in range(times):
            case(e, NP)
    return e.view(np.ndarray)


@pytest.mark.parametrize("case,shape,dtype", _cases(DTYPES))
def test_write_reading_its_target_matches_numpy(device, require_dtype, case, shape, dtype):
    require_dtype(dtype)
    start = _start(shape, dtype)
    x = ug.tensor(start, device=device)
    case(x, UG)
    np.testing.assert_array_equal(x.numpy(), _expected(case, start, 1))


@pytest.mark.parametrize("realized_first", [False, True], ids=["lazy", "realized"])
@pytest.mark.parametrize("case,shape", _cases())
def test_write_reading_its_target_under_jit_replays(device, case, shape, realized_first):
    start = _start(shape, np.float32)
    x = ug.tensor(start, device=device)
    if not realized_first:
        x = x + 0       # the argument is a lazy value the first call's schedule computes
    fn = ug.jit(lambda t: case(t, UG))
    for call in range(1, 4):
        fn(x)
        np.testing.assert_array_equal(x.numpy(), _expected(case, start, call), err_msg=f"call {call}")
    assert fn.trace_count == 1


def test_issue_cases(device, require_dtype):
    require_dtype(np.int8)
    x = ug.tensor(np.arange(6.0, dtype=np.float32), device=device)
    x[0] = 10.0
    x[::-1] = x
    np.testing.assert_array_equal(x.numpy(), [5, 4, 3, 2, 1, 10])
    a = ug.tensor(np.arange(12, dtype=np.int8).reshape(3, 4), device=device)
    a[:, :] = a[:, ::-1]
    a[:, ::-1] = a[:, :]
    np.testing.assert_array_equal(a.numpy(), np.arange(12, dtype=np.int8).reshape(3, 4))


def test_aligned_write_after_a_write_stays_in_place(device):
    # what the fix must not cost: a write reading only the element it writes goes in place,
    # into the buffer the write before it wrote (no copy of the target)
    x = ug.tensor(np.arange(8.0, dtype=np.float32), device=device)
    buffer = x.node.buffer
    x[0] = 10.0
    x[::-1] = x[::-1] * 2
    x[1:] = x[1:] + 1
    sched = ug.schedule(x)
    assert not [i for i in sched.kernels if "(assign-copy)" in i.fused], str(sched)
    x.realize()
    assert x.node.buffer is buffer
    e = np.arange(8.0, dtype=np.float32)
    e[0] = 10
    e *= 2
    e[1:] += 1
    np.testing.assert_array_equal(x.numpy(), e)


# --------------------------------------------------------------------- random programs
def _slice(draw: Any, size: int, n: int) -> slice:
    """A slice of `n` elements of an axis of `size`, forwards or backwards, step 1 or 2."""
    step = draw(st.sampled_from([s for s in (1, 2, -1, -2) if (n - 1) * abs(s) < size]))
    span = (n - 1) * abs(step)
    first = draw(st.integers(0, size - 1 - span))
    if step > 0:
        return slice(first, first + span + 1, step)
    return slice(first + span, first - 1 if first > 0 else None, step)


@given(data=st.data())
def test_random_self_overlapping_writes_match_numpy(device, data):
    """Programs of writes between random views of one tensor (shifted, reversed, strided,
    transposed), gathers and reductions of it, all in one schedule or realized in between."""
    shape = data.draw(st.sampled_from([(7,), (4, 4), (3, 5)]), label="shape")
    start = _start(shape, np.float32)
    x = ug.tensor(start, device=device)
    if data.draw(st.booleans(), label="lazy start"):
        x = x + 0
    e = start.copy().view(_CopyFirst)
    for _ in range(data.draw(st.integers(1, 6), label="writes")):
        counts = [data.draw(st.integers(1, s), label="extent") for s in shape]
        dst = tuple(_slice(data.draw, s, n) for s, n in zip(shape, counts))
        kind = data.draw(st.sampled_from(["view", "copy", "whole", "transposed", "gather", "reduction", "scalar",
                                          "realize"]), label="kind")
        if kind == "transposed" and (len(shape) == 1 or counts[0] > shape[1] or counts[1] > shape[0]):
            kind = "view"
        note(f"{kind} into {dst}")
        if kind == "view":
            src = tuple(_slice(data.draw, s, n) for s, n in zip(shape, counts))
            note(f"from {src}")
            x[dst] = x[src] * 2 - 1
            e[dst] = e[src] * 2 - 1
        elif kind == "copy":    # the value is a view of x, or x itself
            src = tuple(_slice(data.draw, s, n) for s, n in zip(shape, counts))
            note(f"from {src}")
            x[dst] = x[src]
            e[dst] = e[src]
        elif kind == "whole":   # all of x, written through axes flipped or not
            flips = tuple(slice(None, None, data.draw(st.sampled_from([1, -1]), label="step")) for _ in shape)
            note(f"x[{flips}] = x")
            x[flips] = x
            e[flips] = e
        elif kind == "transposed":
            src = tuple(_slice(data.draw, s, n) for s, n in zip(shape[::-1], counts[::-1]))
            note(f"from .T{src}")
            x[dst] = x.T[src].T + 1
            e[dst] = e.T[src].T + 1
        elif kind == "gather":
            idx = np.array(data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=counts[0], max_size=counts[0])))
            note(f"from [{idx}]")
            x[dst] = x[idx][(slice(None),) + dst[1:]] + 1
            e[dst] = e[idx][(slice(None),) + dst[1:]] + 1
        elif kind == "reduction":
            x[dst] = x[dst] - x.max(axis=0)[dst[1:]]
            e[dst] = e[dst] - e.max(axis=0)[dst[1:]]
        elif kind == "scalar":
            x[dst] = 3.0
            e[dst] = 3.0
        else:
            x.realize()
    np.testing.assert_array_equal(x.numpy(), e.view(np.ndarray))
