"""``pace-nb datasets``: which datasets are available offline, and where they are looked for."""
from __future__ import annotations

import argparse

from pace_nb.data.datasets import DATASETS, data_root, dataset_status
from pace_nb.core.io import atomic_write_json


def register(sub) -> None:
    p = sub.add_parser("datasets", help="list datasets, whether their raw files are present, and where",
                       description=__doc__)
    p.add_argument("--data-root", default=None, help="raw-data root (default: $PACE_NB_DATA, else ./data)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the table as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = data_root(args.data_root)
    table = dataset_status(root)
    table.insert(2, "split", [",".join(f"{r:g}" for r in DATASETS[n].ratios) for n in table["name"]])
    print(f"data root: {root}")
    print(table[["name", "present", "split", "folder", "missing"]].to_string(index=False))
    if args.json:
        atomic_write_json(args.json, {"data_root": str(root), "datasets": table.to_dict(orient="records")})
    return 0
