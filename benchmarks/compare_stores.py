"""Compare the result rows of two results stores cell by cell, as CSV text.

Used to show that a refactor leaves every number bit-identical::

    python3 benchmarks/compare_stores.py OLD_STORE NEW_STORE            # ignores `seconds`
    python3 benchmarks/compare_stores.py A B --ignore-params data,train  # params keys added later

Rows are typed by ``normalize_rows`` first, so a store written before the dimension columns
(``study``, ``evaluation``, ``beta``, ``scope``, ``data_seed``, ``run_seed``) migrates and compares
with a new one. Exit status 0 when every compared column is identical, 1 otherwise (the first differing row
is printed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from pace_nb.core.schema import KEY_COLUMNS
from pace_nb.experiments.store import normalize_rows


def rows(store: Path, ignore: list[str], ignore_params: list[str]) -> pd.DataFrame:
    parts = [pd.read_csv(p, dtype=str, keep_default_na=False) for p in sorted((store / "cells").glob("*.csv"))]
    if not parts:
        sys.exit(f"{store}: no cells/*.csv")
    f = normalize_rows(pd.concat(parts, ignore_index=True)).astype(object).fillna("").astype(str)  # old stores migrate
    f = f.drop(columns=[c for c in ignore if c], errors="ignore")
    if ignore_params and "params" in f:
        def strip(text: str) -> str:
            d = json.loads(text) if text else {}
            return json.dumps({k: v for k, v in d.items() if k not in ignore_params}, sort_keys=True)
        f["params"] = f["params"].map(strip)
    return f.sort_values([k for k in KEY_COLUMNS if k in f]).reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--ignore", default="seconds", help="comma-separated columns left out (default: seconds)")
    ap.add_argument("--ignore-params", default="", help="comma-separated keys dropped from the params JSON")
    args = ap.parse_args(argv)
    ig, igp = args.ignore.split(","), [k for k in args.ignore_params.split(",") if k]
    a, b = rows(args.a, ig, igp), rows(args.b, ig, igp)
    print(f"{args.a}: {len(a)} rows; {args.b}: {len(b)} rows")
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        print("different columns or row counts:", list(a.columns), list(b.columns))
        return 1
    diff = a != b
    if diff.values.any():
        print("differing cells per column:", diff.sum()[diff.sum() > 0].to_dict())
        i = diff.any(axis=1).idxmax()
        print(pd.DataFrame({"a": a.loc[i], "b": b.loc[i]})[diff.loc[i]])
        return 1
    print(f"IDENTICAL (every column but {', '.join(c for c in ig if c) or 'none'}, compared as CSV text)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
