"""Several readings of SPEAR's Fig. 2 cosine silhouette (docs/DESIGN.md §12); none is claimed as the paper's.

At Dirichlet β = 0.05 each client holds almost one class, so a representation that separates
nodes only by client already scores high against the class labels. Readings per federated
method (one run seed, ``rounds`` rounds):

* ``class`` — today's reading (:func:`~pace_nb.methods.spear.analysis.representation_study`): each
  node embedded by its own client's deployed model on its own subgraph, class labels;
* ``client`` — the same representation scored against the *client* labels;
* ``central`` — each receiver's deployed model applied to every node of the complete graph,
  class labels: one score per receiver (``receiver`` = k) plus their ``mean`` and ``min``;

and, method-free, ``confound`` — a representation that encodes only the client id (one-hot
client vector per node) scored against the class labels: what client separation alone earns.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from pace_nb.methods.spear import analysis as sa
from pace_nb.methods.spear import core as sp

NAN = float("nan")


def client_onehot(fg) -> tuple[np.ndarray, np.ndarray]:
    """(one-hot client id per node [N', K], owner [N']) over the nodes some client holds."""
    owner = sa.client_of_nodes(fg)
    keep = owner >= 0
    return np.eye(fg.num_clients)[owner[keep]], keep


def confound_score(fg, sample_size: int | None = 4000, seed: int = 0) -> float:
    """Cosine silhouette, against the class labels, of the client-id-only representation."""
    h, keep = client_onehot(fg)
    return sa.silhouette(h, fg.data.y.view(-1).numpy()[keep], sample_size, seed)


@torch.no_grad()
def complete_graph_hidden(fg, params) -> torch.Tensor:
    """Hidden layer (post-ReLU layer 1) of ONE model on the complete graph [N, H]."""
    from pace_nb.nn.gcn import gcn_forward, propagation_matrix

    d = fg.data
    return gcn_forward(params, d.x.float(), propagation_matrix(d.edge_index, int(d.num_nodes)), return_hidden=True)[1]


def silhouette_readings(fg, methods: Sequence[str] = ("fedavg", "fedproto", "fedgta"), rounds: int = 100,
                        sample_size: int | None = 4000, seed: int = 0, models: dict | None = None,
                        config: sp.SpearConfig | None = None) -> pd.DataFrame:
    """Rows ``representation, reading, receiver, stat, silhouette``: ``receiver`` = k for the per-receiver
    ``central`` scores, −1 otherwise; ``stat`` "mean" / "min" for the ``central`` summaries ("" else).
    ``models[m]`` (a list of per-client Params) replaces training method ``m``."""
    config = config or sp.SpearConfig()
    y, owner = fg.data.y.view(-1).numpy(), sa.client_of_nodes(fg)
    rows: list[dict[str, Any]] = [dict(representation="client-id only", reading="confound", receiver=-1, stat="",
                 silhouette=confound_score(fg, sample_size, seed))]
    for m in methods:
        per_client = (models or {}).get(m) or sa.federated_models(fg, m, rounds)
        h = sa.hidden_representation(fg, per_client)
        keep = torch.isfinite(h).all(1).numpy() & (owner >= 0)
        rows.append(dict(representation=m, reading="class", receiver=-1, stat="",
                         silhouette=sa.silhouette(h[keep], y[keep], sample_size, seed)))
        rows.append(dict(representation=m, reading="client", receiver=-1, stat="",
                         silhouette=sa.silhouette(h[keep], owner[keep], sample_size, seed)))
        cen = [sa.silhouette(complete_graph_hidden(fg, p)[owner >= 0], y[owner >= 0], sample_size, seed)
               for p in per_client]
        rows += [dict(representation=m, reading="central", receiver=k, stat="", silhouette=s) for k, s in enumerate(cen)]
        finite = [s for s in cen if s == s]
        for stat, fn in (("mean", np.mean), ("min", np.min)):
            rows.append(dict(representation=m, reading="central", receiver=-1, stat=stat,
                             silhouette=float(fn(finite)) if finite else NAN))
    out = []
    for r in rows:
        row = sa.spear_row(fg, "full", NAN, config, representation=r["representation"], reading=r["reading"],
                           stat=r["stat"], silhouette=r["silhouette"], rounds=int(rounds))
        row["receiver"] = int(r["receiver"])
        out.append(row)
    return pd.DataFrame(out).reset_index(drop=True)
