"""``pace-nb datasets``: which datasets are available offline, and where they are looked for.

Raw files are looked up under ``<data root>/<folder>/raw``; the data root is ``--data-root``,
else ``$PACE_NB_DATA``, else ``./data``. Nothing is downloaded (see data/README.md).
``--json`` writes the full table (every expected and missing file name).
"""
from __future__ import annotations

import argparse
import os


def register(sub) -> None:
    p = sub.add_parser("datasets", help="list datasets, whether their raw files are present, and where",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", default=None, help="raw-data root (default: $PACE_NB_DATA, else ./data)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the table as JSON")
    p.set_defaults(func=run)


def _short(missing: str, expected: str) -> str:
    """A few words for the missing files: none, all of them, or the first one and a count."""
    miss = [m for m in missing.split(", ") if m]
    if not miss:
        return ""
    total = len([e for e in expected.split(", ") if e])
    if len(miss) == total:
        return f"all {total} files" if total > 1 else miss[0]
    return miss[0] + (f" and {len(miss) - 1} more" if len(miss) > 1 else "")


def run(args: argparse.Namespace) -> int:
    from pace_nb.core.io import atomic_write_json, check_output_file
    from pace_nb.data.datasets import DATASETS, data_root, dataset_status

    if args.json:
        check_output_file(args.json, "--json")
    root = data_root(args.data_root)
    table = dataset_status(root)
    table.insert(2, "split", [",".join(f"{r:g}" for r in DATASETS[n].ratios) for n in table["name"]])
    where = "--data-root" if args.data_root else "$PACE_NB_DATA" if os.environ.get("PACE_NB_DATA") else "./data"
    print(f"data root: {root} (from {where})")
    shown = table.assign(
        folder=[os.path.relpath(f, root) if f.startswith(str(root)) else f for f in table["folder"]],
        missing=[_short(m, e) for m, e in zip(table["missing"], table["expected_files"], strict=True)])
    print(shown[["name", "present", "split", "folder", "missing"]].to_string(index=False))
    absent = int((~table["present"]).sum())
    if absent:
        print(f"{absent} dataset(s) have no raw files under the data root (nothing is downloaded).\n"
              "hint: put them in <data root>/<folder> (data/README.md), or set $PACE_NB_DATA\n"
              "      (or --data-root) to a folder that has them; --json FILE lists every file name")
    if args.json:
        atomic_write_json(args.json, {"data_root": str(root), "datasets": table.to_dict(orient="records")})
    return 0
