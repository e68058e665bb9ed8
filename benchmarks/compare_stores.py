"""Compare the result rows of two results stores cell by cell, as CSV text.

Used to show that a refactor leaves every number bit-identical::

    python3 benchmarks/compare_stores.py OLD_STORE NEW_STORE            # ignores `seconds`
    python3 benchmarks/compare_stores.py A B --ignore-params data,train  # params keys added later
    python3 benchmarks/compare_stores.py OLD NEW --common                # only the settings both hold
    python3 benchmarks/compare_stores.py OLD NEW --common --entries F.md # + each entry's move in standard errors

``--common`` compares the cells both stores hold for the same setting (matched by setting key, so a
cell recomputed with a data fingerprint matches its older copy) and prints, per method, how many
rows are bit-identical and the largest |difference| of every numeric result column; exit status 0
when every compared row is identical.

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


NUMERIC = ("acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external", "bytes_up", "bytes_down",
           "upload_ratio", "return_ratio")


def common_rows(a_dir: Path, b_dir: Path) -> tuple[pd.DataFrame, int]:
    """Rows of the cells both stores hold for one setting, side by side (suffixes _a, _b), and the
    number of such cells."""
    from pace_nb.experiments.store import ResultsStore

    a, b = ResultsStore.for_reading(a_dir, must_exist=True), ResultsStore.for_reading(b_dir, must_exist=True)
    ca, cb = a.cells(), b.cells()
    pairs = ca[["setting_key", "key"]].merge(cb[["setting_key", "key"]], on="setting_key", suffixes=("_a", "_b"))
    parts = []
    for ka, kb in zip(pairs["key_a"], pairs["key_b"], strict=True):
        ra, rb = a.rows_of(ka), b.rows_of(kb)
        keys = [k for k in KEY_COLUMNS if k in ra and k in rb]
        m = ra.merge(rb, on=keys, suffixes=("_a", "_b"), how="outer", indicator=True)
        parts.append(m)
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), len(pairs)


def compare_common(a_dir: Path, b_dir: Path, entries_out: Path | None = None) -> int:
    rows, n = common_rows(a_dir, b_dir)
    print(f"{a_dir} vs {b_dir}: {n} settings in both, {len(rows)} rows")
    if rows.empty:
        return 1
    unmatched = int((rows["_merge"] != "both").sum())
    both = rows[rows["_merge"] == "both"]
    cols = [c for c in NUMERIC if f"{c}_a" in both and f"{c}_b" in both]
    diff = {c: (pd.to_numeric(both[f"{c}_a"], errors="coerce") - pd.to_numeric(both[f"{c}_b"], errors="coerce")).abs()
            for c in cols}
    same = pd.Series(True, index=both.index)
    for c in cols:
        a, b = both[f"{c}_a"], both[f"{c}_b"]
        same &= (a == b) | (a.isna() & b.isna())
    lines = ["| method | rows | bit-identical | " + " | ".join(f"max abs diff {c}" for c in cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    for method, g in both.groupby("method", sort=True):
        cells = [f"{diff[c][g.index].max():.2g}" if diff[c][g.index].notna().any() else "–" for c in cols]
        lines.append(f"| {method} | {len(g)} | {int(same[g.index].sum())} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print(f"rows in one store only: {unmatched}; bit-identical rows: {int(same.sum())} of {len(both)}")
    # table entries: the mean accuracy over seeds of each setting's pooled rows, against its seed noise
    pooled = both[both["receiver"].astype(str) == "-1"]
    keys = [k if k in pooled else f"{k}_a"
            for k in ("study", "dataset", "partition", "num_clients", "beta", "data_seed", "method", "variant", "rank")
            if k in pooled or f"{k}_a" in pooled]
    acc_a, acc_b = pd.to_numeric(pooled["acc_a"], errors="coerce"), pd.to_numeric(pooled["acc_b"], errors="coerce")
    g = pooled.assign(a=acc_a, b=acc_b).groupby(keys, dropna=False).agg(a=("a", "mean"), b=("b", "mean"),
                                                                         sd=("a", "std"), n=("a", "size"))
    g["d"], g["se"] = (g["a"] - g["b"]).abs(), g["sd"] / g["n"] ** 0.5
    moved = g[g["d"] > 0].reset_index(drop=True)
    z = moved["d"] / moved["se"].where(moved["se"] > 0)
    big = int(moved["d"].to_numpy().argmax()) if len(moved) else None
    far = int(z.fillna(-1.0).to_numpy().argmax()) if z.notna().any() else None
    print(f"table entries (mean accuracy over seeds of a setting's pooled rows): {len(g)}; changed: {len(moved)}"
          + (f"; largest change {moved['d'][big]:.3g} points (SE {moved['se'][big]:.2g})" if big is not None else "")
          + (f"; farthest {z[far]:.2g} standard errors of our seed mean ({moved['d'][far]:.2g} points)"
             if far is not None else ""))
    if entries_out is not None:
        entries_out.write_text(entry_report(g.reset_index(), a_dir, b_dir))
        print(f"wrote {entries_out}")
    return 0 if unmatched == 0 and bool(same.all()) else 1


def entry_report(g: pd.DataFrame, a_dir: Path, b_dir: Path, top: int = 15) -> str:
    """Markdown: how far each table entry (a setting's mean accuracy over its seeds) moved between the
    stores, in standard errors of the first store's seed mean (``sd / sqrt(n)``): the counts within
    1, 2 and 3 standard errors, per method, and the largest moves."""
    from scipy.stats import norm

    g = g.copy()
    g["z"] = g["d"] / g["se"].where(g["se"] > 0)
    # a pure redraw of the seeds' randomness: Δ is a difference of two independent seed means, sd √2·SE
    tail = [2 * norm.sf(t / 2 ** 0.5) for t in (0.0, 1.0, 2.0, 3.0)]  # P(|Δ|/SE > t)
    redraw = [tail[0] - tail[1], tail[1] - tail[2], tail[2] - tail[3], tail[3], None]  # per band below
    bands = [("≤ 1 SE", g["z"] <= 1), ("1–2 SE", (g["z"] > 1) & (g["z"] <= 2)), ("2–3 SE", (g["z"] > 2) & (g["z"] <= 3)),
             ("> 3 SE", g["z"] > 3), ("no SE (one seed)", g["z"].isna())]
    out = [f"# Table entries moved: `{a_dir}` → `{b_dir}`", "",
           "An entry is a setting's mean accuracy (%) over its run seeds (pooled rows); its move |Δ| is divided by "
           "the standard error of the first store's seed mean (sd / √n).", "",
           f"{len(g)} entries; mean |Δ| {g['d'].mean():.2f} points; median {g['z'].median():.2f} SE.", "",
           "Of the entries with an SE, the share in each band, beside the share a pure redraw of the seeds' "
           "randomness would put there (normal noise: Δ is then the difference of two independent seed means, "
           "sd √2 · SE, so the median is 0.95 SE).", "",
           "| band | entries | share | share of those with an SE | redraw |", "|---|---|---|---|---|"]
    with_se = int(g["z"].notna().sum())
    for (name, m), exp in zip(bands, redraw, strict=True):
        of_se = f"{100 * m.sum() / with_se:.1f} %" if exp is not None and with_se else "–"
        out.append(f"| {name} | {int(m.sum())} | {100 * m.mean():.1f} % | {of_se} | "
                   + (f"{100 * exp:.1f} %" if exp is not None else "–") + " |")
    method = "method" if "method" in g else "method_a"
    out += ["", "| method | entries | mean abs Δ (points) | median SE | largest SE |", "|---|---|---|---|---|"]
    for m, part in g.groupby(method, sort=True):
        out.append(f"| {m} | {len(part)} | {part['d'].mean():.2f} | {part['z'].median():.2f} | {part['z'].max():.2f} |")
    keys = [c for c in g.columns if c not in ("a", "b", "sd", "n", "d", "se", "z")]
    for title, column in ((f"Largest {top} moves:", "z"), (f"Largest {top} moves in points:", "d")):
        out += ["", title, "", "| " + " | ".join(keys) + " | before | after | |Δ| | SE | |Δ|/SE |",
                "|" + "---|" * (len(keys) + 5)]
        for _, r in g.sort_values(column, ascending=False).head(top).iterrows():
            out.append("| " + " | ".join(str(r[k]) for k in keys)
                       + f" | {r['a']:.2f} | {r['b']:.2f} | {r['d']:.2f} | {r['se']:.2f} | {r['z']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--ignore", default="seconds", help="comma-separated columns left out (default: seconds)")
    ap.add_argument("--ignore-params", default="", help="comma-separated keys dropped from the params JSON")
    ap.add_argument("--common", action="store_true", help="only the settings both stores hold; max |diff| per method")
    ap.add_argument("--entries", type=Path, default=None, metavar="FILE",
                    help="with --common: write the table entries' moves in standard errors as markdown")
    args = ap.parse_args(argv)
    if args.common:
        return compare_common(args.a, args.b, args.entries)
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
