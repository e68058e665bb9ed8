"""CiteSeer probe (docs/DESIGN.md §12): graph facts of the PyG/OpenFGL CiteSeer, the Louvain clients, and
Local accuracy split by node kind and by mask draw.

* graph: nodes, undirected edges, isolated nodes, all-zero feature rows (PyG fills CiteSeer's 15
  test indices missing from ``tx`` with zero features and label 0 — OpenFGL loads the same
  ``Planetoid`` class and only adds ``to_undirected`` + ``remove_self_loops``);
* Louvain K clients: sizes, nodes without an in-client neighbour (isolated in the global graph or
  by the cut), majority share;
* Local (five paper seeds) pooled test accuracy for data seeds ``--data-seeds`` (mask draws), and,
  for the first one, accuracy on isolated / zero-feature / other test nodes, and with plain random
  (not class-stratified) 20/40/40 masks.

    PACE_NB_DATA=... python3 benchmarks/citeseer_probe.py [--dataset CiteSeer] [--data-seeds 2024 2025 2026]
"""
from __future__ import annotations

import argparse
from dataclasses import replace

from pace_nb.data.checks import graph_facts, lonely_nodes


def _local_acc(fg, seeds):
    import torch

    from pace_nb.nn.training import TrainConfig, batched_logits, train_local

    local = train_local(fg, seeds, TrainConfig(), progress=False)
    k_n = fg.num_clients
    pred = torch.full((len(seeds), int(fg.data.num_nodes)), -1, dtype=torch.long)
    for s in range(len(seeds)):
        idx = list(range(s * k_n, (s + 1) * k_n))
        z = batched_logits({k: v[idx] for k, v in local.params.items()}, fg.clients, list(range(k_n)))
        for c, zc in zip(fg.clients, z, strict=True):
            pred[s, c.global_ids] = zc.argmax(1)
    return pred


def main(argv=None) -> int:
    import numpy as np
    import torch
    from pace_nb.core.config import PAPER_SEEDS
    from pace_nb.data.federation import build_federated
    from pace_nb.data.datasets import load_dataset

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="CiteSeer")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--data-seeds", nargs="+", type=int, default=[2024, 2025, 2026])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    data = load_dataset(args.dataset)
    n = int(data.num_nodes)
    iso = torch.bincount(data.edge_index[0], minlength=n) == 0
    zero_x = (data.x != 0).sum(1) == 0
    y = data.y.view(-1)
    facts = graph_facts(data)
    print(f"{args.dataset}: {facts['nodes']} nodes, {facts['edges']} undirected edges, {facts['isolated']} isolated, "
          f"{facts['zero_feature_rows']} all-zero feature rows (labels {torch.bincount(y[zero_x]).tolist()}), "
          f"self loops {facts['self_loops']}")
    seeds = tuple(PAPER_SEEDS)
    for i, ds in enumerate(args.data_seeds):
        fg = build_federated(args.dataset, scheme="louvain", num_clients=args.clients, seed=ds)
        test = fg.global_mask("test")
        pred = _local_acc(fg, seeds)
        acc = (pred[:, test] == y[test]).float().mean(1) * 100
        print(f"data seed {ds}: Local pooled test acc {acc.mean():.2f} ± {acc.std():.2f} (5 run seeds)")
        if i:
            continue
        sizes = [c.num_nodes for c in fg.clients]
        lonely = lonely_nodes(fg)
        print(f"Louvain K={args.clients}: client sizes {sizes}; nodes without an in-client neighbour "
              f"{int(lonely.sum())} ({int(iso.sum())} isolated globally); test nodes {int(test.sum())}")
        for name, sel in (("isolated", iso), ("no in-client neighbour", lonely), ("all-zero features", zero_x),
                          ("other", ~lonely & ~zero_x)):
            m = test & sel
            if int(m.sum()):
                a = (pred[:, m] == y[m]).float().mean(1) * 100
                print(f"  {name:<24} {int(m.sum()):5d} test nodes  Local acc {a.mean():6.2f}")
        ex = test & ~lonely & ~zero_x
        a = (pred[:, ex] == y[ex]).float().mean(1) * 100
        print(f"  pooled without isolated / zero-feature test nodes: {a.mean():.2f}")
        # plain random masks (no class stratification), same clients
        rng = np.random.default_rng(ds)
        clients = []
        for c in fg.clients:
            perm = rng.permutation(c.num_nodes)
            a_, b_ = int(0.2 * c.num_nodes), int(0.6 * c.num_nodes)
            tr, va, te = (torch.zeros(c.num_nodes, dtype=torch.bool) for _ in range(3))
            tr[perm[:a_]], va[perm[a_:b_]], te[perm[b_:]] = True, True, True
            clients.append(replace(c, train_mask=tr, val_mask=va, test_mask=te))
        fr = replace(fg, clients=clients)
        pr = _local_acc(fr, seeds)
        tr_ = fr.global_mask("test")
        a = (pr[:, tr_] == y[tr_]).float().mean(1) * 100
        print(f"  random (unstratified) 20/40/40 masks, data seed {ds}: Local {a.mean():.2f} ± {a.std():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
