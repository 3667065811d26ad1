"""Contributes `ug bench` to the `ug` command (the `ug_register_commands` hook).

ug loads this module with every plugin whenever its registry loads, so it imports nothing of
the benchmark: `bench` (and torch, when installed) load only when the command runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import ug_core as ug
from ug_core.hookspecs import CommandSpec

if TYPE_CHECKING:  # annotations only: this module loads in every process that uses ug
    import argparse


def run(args: argparse.Namespace) -> int:
    from . import bench

    # bench parses its own arguments; from a command line it may restart the process (see
    # ug_bench.bench.BLAS_SPIN_ENV), which it must not do to a program calling ug_core.cli.main
    return bench.main_from_command_line(args.argv) if args.from_command_line else bench.main(args.argv)


@ug.hookimpl
def ug_register_commands(register: Callable[[CommandSpec], None]) -> None:
    register(CommandSpec(name="bench", help="benchmark ug against numpy/torch (ug bench --help)", run=run))
