"""Our 20/40/40 masks beside an OpenFGL split cache (``node_cls/default_split/glb_{train,val,test}_k.pkl``).

OpenFGL draws each client's split with ``np.random.shuffle`` per class on NumPy's *global* state,
and never calls its own ``seed_everything`` (its ``--seed 2024`` is parsed but unused), so a
split cache is one unseeded draw. This probe reads such a cache (the files are pickled lists of
global node ids; they are parsed with ``pickletools`` — nothing in them is executed) and prints,
per client:

* whether the split *semantics* agree: our train / val / test sizes per class equal OpenFGL's
  (per class ⌊0.2 n⌋ / ⌊0.6 n⌋ − ⌊0.2 n⌋ / rest);
* how many of OpenFGL's training nodes our draw (data seed ``--data-seed``) also trains on;
* whether NumPy's legacy generator seeded with ``--np-seed`` — after skipping 0 … ``--offsets``
  32-bit words, i.e. whatever ran before the split — reproduces the cache exactly.

    PACE_NB_DATA=... python3 benchmarks/openfgl_splits.py SPLIT_DIR [--dataset Cora] [--clients 20]

``SPLIT_DIR`` is an OpenFGL ``dataset/distrib/subgraph_fl_louvain_1_<D>_client_<K>/node_cls/default_split``
folder (OpenFGL's repository ships Cora, K = 20).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pace_nb.data.openfgl import SPLITS, client_split, openfgl_split, per_class_sizes, read_id_list


def main(argv=None) -> int:
    from pace_nb.data.federation import build_federated

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("split_dir", type=Path)
    ap.add_argument("--dataset", default="Cora")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--data-seed", type=int, default=2024, help="our mask draw")
    ap.add_argument("--np-seed", type=int, default=2024, help="OpenFGL's --seed default")
    ap.add_argument("--offsets", type=int, default=20000, help="32-bit words skipped before the split")
    args = ap.parse_args(argv)

    fg = build_federated(args.dataset, "louvain", num_clients=args.clients, seed=args.data_seed)
    y = fg.data.y.numpy()
    gold = [{s: sorted(read_id_list(args.split_dir / f"glb_{s}_{k}.pkl")) for s in SPLITS}
            for k in range(args.clients)]
    same_sizes = same_nodes = 0
    print("client  nodes  train/val/test (OpenFGL)  sizes per class equal  our train ∩ theirs")
    for k, c in enumerate(fg.clients):
        nodes = c.global_ids.numpy()
        ours = client_split(c)
        if sorted(np.concatenate([gold[k][s] for s in SPLITS]).tolist()) == nodes.tolist():
            same_nodes += 1
        sizes = per_class_sizes(ours, y, fg.num_classes) == per_class_sizes(gold[k], y, fg.num_classes)
        same_sizes += sizes
        shared = len(set(ours["train"].tolist()) & set(gold[k]["train"]))
        print(f"{k:6d} {len(nodes):6d}  {'/'.join(str(len(gold[k][s])) for s in SPLITS):>24s}  {str(sizes):>21s}"
              f"  {shared}/{len(gold[k]['train'])}")
    print(f"\nclients with OpenFGL's node set: {same_nodes}/{args.clients}; "
          f"with OpenFGL's split sizes per class: {same_sizes}/{args.clients}")

    nodes0 = fg.clients[0].global_ids.numpy()  # the cache's client 0 (its local order is ascending global id)
    rs = np.random.RandomState(args.np_seed)
    start = rs.get_state()
    for skip in range(args.offsets + 1):
        rs.set_state(start)
        if skip:
            rs.bytes(4 * skip)
        if openfgl_split(nodes0, y, rs) == gold[0]:
            print(f"np.random.seed({args.np_seed}) reproduces client 0 after skipping {skip} words")
            return 0
    print(f"np.random.seed({args.np_seed}) does not reproduce client 0's split after skipping 0…{args.offsets} "
          f"words: the cache is not a seeded draw of NumPy's legacy generator (OpenFGL never seeds it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
