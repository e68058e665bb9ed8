"""``pace-nb methods``: every registered method — the package's and the plugins' — with its
label, paper, evaluation, paper table rows, whether it runs in SPEAR's comparison, and its
parameters with their defaults (set them with ``--param METHOD.NAME=VALUE`` or a grid's
``method_params``). ``--json`` writes the same records.

Methods of your own package join with ``pace-nb --plugin MODULE methods`` (or
``$PACE_NB_PLUGINS``, or an installed ``pace_nb.methods`` entry point; docs/ARCHITECTURE.md).
"""
from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    p = sub.add_parser("methods", help="list every registered method (plugins included) and its parameters",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="FILE", default=None, help="also write the records as JSON")
    p.set_defaults(func=run)


def _value(v) -> str:
    return json.dumps(list(v) if isinstance(v, tuple) else v, default=str)


def lines(records: list[dict]) -> list[str]:
    """The listing: a head line per method, then its paper and its parameters."""
    out = []
    for r in records:
        rows = ", ".join(f"{t} row {i}" for t, i in r["paper_rows"].items())
        tags = "; ".join(t for t in (f"paper {rows}" if rows else "", "in SPEAR's comparison" if r["comparison"] else "")
                         if t)
        aliases = f" (aliases: {', '.join(r['aliases'])})" if r["aliases"] else ""
        out.append(f"{r['id']}{aliases}: {r['label']} — evaluated at the "
                   f"{r['evaluation'].replace('_', ' ')}" + (f"; {tags}" if tags else ""))
        out.append(f"    paper: {r['paper'] or '-'}   module: {r['module']}")
        params = ", ".join(f"{k}={_value(v)}" for k, v in r["parameters"].items())
        out.append(f"    parameters: {params or 'none'}")
    return out


def run(args: argparse.Namespace) -> int:
    from pace_nb.core.io import atomic_write_json, check_output_file
    from pace_nb.methods.registry import describe_methods

    if args.json:
        check_output_file(args.json, "--json")
    records = describe_methods()
    print("\n".join(lines(records)))
    print(f"{len(records)} methods")
    if args.json:
        atomic_write_json(args.json, {"methods": json.loads(json.dumps(records, default=str))})
    return 0
