"""``pace-nb``: the scriptable face of pace_nb (docs/DESIGN.md §11).

Each subcommand lives in ``pace_nb/cli/commands/<name>.py`` and exposes ``register(sub)``
(adds its parser, sets ``func=run`` and optionally ``interrupted=fn(args) -> str``, the line
printed on Ctrl-C saying what was kept); list it in :data:`COMMANDS`. Command modules import
only the standard library and light ``pace_nb.core`` modules at the top: torch, PyG and pandas
are imported inside ``run``, so ``--help``, argument errors and ``pace-nb datasets`` start fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import textwrap

from pace_nb.core.errors import PaceNBError

COMMANDS = ("datasets", "methods", "partition", "run", "spear", "grid", "tables", "report", "figures", "flower")

DESCRIPTION = """\
pace_nb — one-shot federated graph learning, reproducible from the command line.

  pace-nb datasets                 which datasets are available offline, and where
  pace-nb methods                  every registered method (plugins included): label, paper, parameters
  pace-nb partition ...            split a dataset among K clients (Louvain/METIS/Dirichlet)
  pace-nb run                      PACE (+ Local and baselines) on the embedded demo graph
  pace-nb spear                    SPEAR (training-free PPR prototypes) and its ablations
  pace-nb grid CONFIG              run an experiment grid into the results store (resumable)
  pace-nb tables                   the papers' tables, ours beside the paper's values
  pace-nb report                   REPRODUCTION.md: every table, agreement with the papers, run times
  pace-nb figures [--quick]        execute every notebook with papermill; figures to figures/
  pace-nb flower simulate|deploy|export
                                   PACE, SPEAR or a one-shot baseline as Flower apps (or their files)

Run `pace-nb COMMAND --help` for each command's options. Defaults are the papers' values.
Methods of your own: `pace-nb --plugin mypkg.methods COMMAND ...` (or $PACE_NB_PLUGINS, or an
installed package's `pace_nb.methods` entry point).
"""

PLUGIN_HELP = ("import MODULE first: a plugin that registers methods (repeatable or comma-separated; "
               "also $PACE_NB_PLUGINS and installed `pace_nb.methods` entry points)")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions kept as written; option help wrapped at spaces only, so an id such as
    ``spear-ablation`` or ``flower simulate|deploy|export`` is never split at its hyphen."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pace-nb", description=DESCRIPTION, formatter_class=HelpFormatter
    )
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE", help=PLUGIN_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"pace_nb.cli.commands.{name}").register(sub)
    for command in sub.choices.values():  # after the command too: `pace-nb run --plugin M ...`
        command.formatter_class = HelpFormatter
        command.add_argument("--plugin", action="append", default=[], dest="command_plugin", metavar="MODULE",
                             help=PLUGIN_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        plugins = [*args.plugin, *getattr(args, "command_plugin", [])]
        if plugins:
            from pace_nb.methods.plugins import import_plugins

            import_plugins(plugins)
        return int(args.func(args) or 0)
    except PaceNBError as exc:
        print(f"pace-nb: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        note = getattr(args, "interrupted", None)
        print(f"pace-nb: {note(args) if note else 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
