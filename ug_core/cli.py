"""The `ug` command: `ug devices`, `ug demo`, and the commands plugins contribute through the
`ug_register_commands` hook (`ug bench`, from the ug-bench plugin)."""

from __future__ import annotations

import argparse
import sys
import warnings

from .hookspecs import CommandSpec


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


def _add_contributed(sub: argparse._SubParsersAction, command: CommandSpec) -> None:
    """Add a plugin's command to `ug`'s subcommands (so that `ug --help` lists it)."""
    if command.add_arguments is None:
        # listed only: main runs it before parsing anything, and it parses its own arguments
        sub.add_parser(command.name, help=command.help, add_help=False)
        return
    # its arguments go on a parser of their own first, so a plugin whose add_arguments raises
    # leaves nothing half-declared behind (and never breaks `ug devices` or the other commands)
    arguments = argparse.ArgumentParser(add_help=False)
    try:
        command.add_arguments(arguments)
    except (Exception, SystemExit) as e:
        warnings.warn(f"ug: command {command.name!r} is left out: its add_arguments raised "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=2)
        return
    p = sub.add_parser(command.name, help=command.help, description=command.help, parents=[arguments])
    p.set_defaults(fn=command.run)


def main(argv: list[str] | None = None) -> int:
    from .plugins import registry

    from_command_line = argv is None
    argv = sys.argv[1:] if argv is None else argv
    # what every command gets besides its own parsed arguments (see CommandSpec)
    args = argparse.Namespace(argv=argv[1:], from_command_line=from_command_line)
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
    # a plugin's command named like a built-in one (or like one of a plugin loaded before) is reported and left out
    contributed = registry.commands(builtin=set(sub.choices))
    chosen = contributed.get(argv[0]) if argv else None
    if chosen is not None and chosen.add_arguments is None:  # it parses args.argv itself, --help included
        return int(chosen.run(args) or 0)
    for command in contributed.values():
        _add_contributed(sub, command)
    if argv and not argv[0].startswith("-") and argv[0] not in sub.choices and registry.skipped_plugins:
        # e.g. `UG_PLUGINS=llvm ug bench`: the plugin that has the command may be one not loaded
        print(f"ug: {argv[0]!r} is a command of neither ug nor a loaded plugin; plugins not loaded "
              f"(UG_PLUGINS, UG_DISABLE_PLUGINS): {', '.join(sorted(registry.skipped_plugins))}", file=sys.stderr)
    parser.parse_args(argv, namespace=args)
    return int(args.fn(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
