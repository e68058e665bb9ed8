"""Fidelity runs: baselines with explicit hyperparameters beside Local, pooled mean ± std.

One federation (``--partition``, ``--clients``, ``--data-seed``), Local trained once for the
run seeds, then every ``--runs`` entry ``method[:key=value[;key=value]]`` (e.g.
``fedprox:mu=0.01``) evaluated with those Local models. Prints one line per run (native and
+CNLL accuracy / weighted-F1) and, with ``--json F``, writes the summaries, the params of each
run and any per-run diagnostics (FedPub's similarity diagonal).

    PACE_NB_DATA=... python3 benchmarks/fidelity.py --dataset PubMed \\
        --runs fedprox,fedprox:mu=0.01,fedpub --json out.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def parse_run(text: str) -> tuple[str, dict]:
    name, _, rest = text.partition(":")
    params = {}
    for item in filter(None, rest.split(";")):
        k, _, v = item.partition("=")
        try:
            params[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            params[k.strip()] = v.strip()
    return name.strip(), params


def main(argv=None) -> int:
    import torch

    from pace_nb.analysis.summary import summarize
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.data.federation import build_federated
    from pace_nb.methods.protocol import run_protocol
    from pace_nb.nn.training import TrainConfig, train_local

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--partition", default="louvain")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=2024)
    ap.add_argument("--seeds", default=",".join(map(str, PAPER_SEEDS)))
    ap.add_argument("--runs", required=True, help="comma-separated method[:k=v;k=v] entries")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    fg = build_federated(args.dataset, scheme=args.partition, num_clients=args.clients, seed=args.data_seed)
    t0 = time.perf_counter()
    local = train_local(fg, seeds, TrainConfig(), progress=False)
    out = {"dataset": args.dataset, "partition": args.partition, "clients": args.clients,
           "data_seed": args.data_seed, "seeds": list(seeds), "runs": []}
    print(f"{args.dataset} {args.partition} K={args.clients} data seed {args.data_seed}; Local trained "
          f"in {time.perf_counter() - t0:.0f}s", flush=True)
    for spec in ["local"] + args.runs.split(","):
        name, params = parse_run(spec)
        t1 = time.perf_counter()
        rows = run_protocol(fg, seeds=seeds, methods=[name], method_params={name: params}, local=local,
                            progress=False)
        s = summarize(rows, sort=False)
        for rec in s.to_dict(orient="records"):
            line = (f"{spec:<28} {rec['method']:<9} {rec['variant']:<7} acc {rec['acc_mean']:6.2f} ± "
                    f"{rec['acc_std']:.2f}  wF1 {rec['f1w_mean']:6.2f} ± {rec['f1w_std']:.2f}")
            print(line, flush=True)
        pooled = rows[rows["receiver"] < 0]
        out["runs"].append({"spec": spec, "method": name, "params": params,
                            "row_params": json.loads(pooled["params"].iloc[-1]) if len(pooled) else {},
                            "seconds": time.perf_counter() - t1,
                            "summary": json.loads(s.to_json(orient="records"))})
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
