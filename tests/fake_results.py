"""Hand-built result rows for the results/diagnostics/tables/grid tests (no training)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

SEEDS = (1, 2, 3, 4, 5)


def make_rows(dataset="Cora", partition="louvain", num_clients=3, seeds=SEEDS, methods=None,
              beta=None, base=70.0, receivers=True, seed_offset=0.0):
    """Deterministic rows: acc = base + method offset + 0.1·seed; receivers r: + r."""
    methods = methods or {("local", "native", 0): 0.0, ("pace", "full", 6): 1.0}
    params = json.dumps({"beta": beta} if beta is not None else {})
    rows = []
    for (method, variant, rank), off in methods.items():
        for s in seeds:
            acc = base + off + 0.1 * s + seed_offset
            common = dict(dataset=dataset, partition=partition, num_clients=num_clients, seed=s,
                          method=method, variant=variant, rank=rank, params=params)
            rows.append({**common, "receiver": -1, "acc": acc, "f1_weighted": acc - 1,
                         "f1_macro": acc - 2, "alpha": np.nan, "upload_ratio": 12.0 if method == "pace" else np.nan,
                         "return_ratio": 10.0 if method == "pace" else np.nan, "seconds": 1.0, "n_test": 100})
            if receivers:
                for r in range(num_clients):
                    rows.append({**common, "receiver": r, "acc": acc + r, "f1_weighted": acc + r - 1,
                                 "f1_macro": acc + r - 2, "alpha": 0.5 if method == "pace" else np.nan,
                                 "acc_local": base + 0.1 * s + r + seed_offset, "n_test": 30})
    return pd.DataFrame(rows)
