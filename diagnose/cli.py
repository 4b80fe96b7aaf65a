"""The `mdiag` command: parses options, calls the library, prints.  Nothing else lives here."""
from __future__ import annotations

import json
import os
import sys

import click

from . import __version__

EXIT_OK, EXIT_FAILURE_FOUND, EXIT_USAGE = 0, 1, 2

HELP = """Name the root cause of a failed distributed training job from its logs.

PATHS are log files (.err/.out/.log, optionally .gz), folders (searched recursively,
including torchrun --log-dir trees with error.json) or globs.  mdiag reads every line,
orders events on one timeline and reports the earliest real failure, not the NCCL
timeouts and SIGTERMs that follow it.

\b
Examples:
  mdiag logs/megatron-1234.err          one merged sbatch output file
  mdiag logs/                           a folder of per-rank / per-node files
  mdiag --json logs/ > diag.json        the same diagnosis as JSON for a dashboard

\b
Exit status: 0 no failure found, 1 a failure was diagnosed, 2 usage or input error.
"""


# Subcommands live in their own modules and are imported only when used (keeps `mdiag` start-up fast).
SUBCOMMANDS = {
    "patterns": ("diagnose.cli_patterns", "patterns"),
    "hook": ("diagnose.hook", "hook"),
    "fleet": ("diagnose.fleet", "fleet"),
}


class _DefaultGroup(click.Group):
    """`mdiag PATHS...` runs the diagnosis; `mdiag patterns ...` etc. are subcommands."""

    def list_commands(self, ctx):
        return sorted(self.commands) + sorted(n for n in SUBCOMMANDS if n not in self.commands)

    def get_command(self, ctx, name):
        if name in SUBCOMMANDS and name not in self.commands:
            import importlib

            module, attr = SUBCOMMANDS[name]
            try:
                self.add_command(getattr(importlib.import_module(module), attr), name)
            except (ImportError, AttributeError):
                return None
        return super().get_command(ctx, name)

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in SUBCOMMANDS and args[0] not in ("--help", "-h", "--version"):
            args = ["run", *args]
        elif not args:
            args = ["run"]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mdiag")
def main() -> None:
    pass


@main.command("run", help=HELP)
@click.argument("paths", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout and nothing else.")
@click.option("--patterns", "pattern_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra folder of pattern *.toml files (repeatable); a pattern with a built-in id replaces it.")
def run(paths: tuple[str, ...], as_json: bool, pattern_dirs: tuple[str, ...]) -> None:
    from rich.console import Console

    from .collect import InputError
    from .patterns import PatternError
    from .pipeline import diagnose
    from .report import render, to_dict

    err = Console(stderr=True)
    try:
        d = diagnose(list(paths), pattern_dirs=pattern_dirs)
    except (InputError, PatternError) as exc:
        click.echo(f"mdiag: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if as_json:
        sys.stdout.write(json.dumps(to_dict(d), ensure_ascii=True) + "\n")
    else:
        no_color = bool(os.environ.get("NO_COLOR"))
        out = Console(no_color=no_color, highlight=False, soft_wrap=False)
        render(d, out)
    del err
    sys.exit(EXIT_FAILURE_FOUND if d.status == "failed" else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
