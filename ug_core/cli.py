"""The `ug` command: `ug devices`, `ug demo`, `ug bench`."""

from __future__ import annotations

import argparse
import sys


def _devices(args: argparse.Namespace) -> int:
    from .plugins import registry

    rows = registry.status()
    header = ("device", "entry point", "plugin", "version", "status")
    table = [header] + [(r.name, r.entry_point or "-", r.plugin, r.version,
                         ("usable" + (f": {r.detail}" if r.detail else "")) if r.usable
                         else r.reason if r.name == "-" else f"not usable: {r.reason}") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4])
    print(f"\npreferred device: {registry.preferred() or 'none'}")
    installed = ", ".join(sorted(registry.entry_points)) or "none"
    print(f"UG_DEVICE takes a device name; UG_PLUGINS and UG_DISABLE_PLUGINS take entry-point names "
          f"(installed: {installed}; ref is built in)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    return demo_main(device=args.device, seq=args.seq, dim=args.dim, heads=args.heads)


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its own argument parser (see ug_core/bench.py)
        from .bench import main as bench_main, main_from_command_line

        # from a command line it may restart the process (see ug_core.bench.BLAS_SPIN_ENV)
        return main_from_command_line(argv[1:]) if from_command_line else bench_main(argv[1:])
    parser = argparse.ArgumentParser(prog="ug", description="ug: lazy tensors fused into compiled kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("devices", help="list devices: plugin, version, usable or why not")
    p.set_defaults(fn=_devices)
    p = sub.add_parser("demo", help="transformer-block forward pass checked against numpy")
    p.add_argument("--device", default=None, help="device name (default: the preferred device)")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.set_defaults(fn=_demo)
    sub.add_parser("bench", help="benchmark ug against numpy/torch (ug bench --help)")
    args = parser.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
