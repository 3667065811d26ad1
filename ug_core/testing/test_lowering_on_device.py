"""The lowering's kernels (`lowering_cases`, which tests/test_lowering.py runs in its loop IR
interpreter) compiled by the device under test itself (`Device.compile`, `Device.run`) and
checked against numpy: its renderer and compiler on kernels built directly in kernel IR."""
from __future__ import annotations

import numpy as np
import pytest

from ug_core.ops import ALU

from . import lowering_cases as lc


def run(case: lc.Case, device: str) -> None:
    missing = lc.missing_dtypes(case, device)
    if missing:
        pytest.skip(f"device {device!r} does not support {', '.join(sorted(map(str, missing)))}")
    lc.run_on_device(case, device)


@pytest.mark.parametrize("name", list(lc.BASIC))
def test_kernel_on_device(device, rng, name, request):
    if device == "ref" and name == "empty_axis_max":
        # the frontend never builds it (max of an empty axis raises), but kernel IR gives the
        # identity, as the lowering does: ref's numpy maximum.reduce raises instead
        request.applymarker(pytest.mark.xfail(strict=True, raises=ValueError,
                                              reason="ref: RMAX over an empty axis raises instead of giving -inf"))
    run(lc.BASIC[name](rng), device)


@pytest.mark.parametrize("n", lc.ROW_LENGTHS)
def test_row_lengths_on_device(device, rng, n):
    for case in lc.row_length_cases(rng, n):
        run(case, device)


def test_outer_blocked_on_device(device, rng):
    for case in lc.outer_blocked_cases(rng):
        run(case, device)


def test_outer_blocked_sum_accuracy_on_device(device, rng):
    run(lc.column_sum_accuracy_case(rng), device)


def test_long_sum_accuracy_on_device(device, rng):
    run(lc.big_sum_case(rng), device)


@pytest.mark.parametrize("op", list(ALU), ids=lambda op: op.name)
def test_every_alu_op_on_device(device, rng, op):
    run(lc.alu_case(rng, op), device)


@pytest.mark.parametrize("src,dst", lc.CASTS, ids=lambda d: np.dtype(d).name)
def test_cast_on_device(device, rng, src, dst):
    run(lc.cast_case(rng, src, dst), device)


def test_random_kernels_on_device(device):
    for seed in range(40):
        case = lc.random_case(seed)
        try:
            run(case, device)
        except Exception as e:
            raise AssertionError(f"seed {seed}:\n{case.kernel}") from e
