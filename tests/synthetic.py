"""Synthetic graphs and reference models shared by the test modules (one place, no test module
imports another): hand-made clients and federations, the PyG reference GCN, batched set-ups."""
from __future__ import annotations

import math
import textwrap

import torch
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv
from torch_geometric.utils import subgraph, to_undirected

from pace_nb.core.config import model_seed
from pace_nb.data.federation import ClientGraph, FederatedGraph
from pace_nb.methods.baselines.base import FedContext
from pace_nb.nn.gcn import init_params, stack_params
from pace_nb.nn.training import TrainConfig

from demo_graphs import SEED

#: The small training config of the baseline tests.
CFG = TrainConfig(epochs=10)


def synthetic_client(index: int, n: int, num_features: int = 40, num_classes: int = 4, density: float = 0.1,
                     avg_degree: float = 4.0, seed: int = 0) -> ClientGraph:
    """Random undirected graph, sparse binary features with a class signal, 30/30/40 % masks."""
    g = torch.Generator().manual_seed(1000 * seed + index)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = (torch.rand(n, num_features, generator=g) < density).float()
    x[torch.arange(n), (y * (num_features // num_classes)) % num_features] = 1.0
    ei = torch.randint(0, n, (2, int(avg_degree * n / 2)), generator=g)
    ei = to_undirected(ei[:, ei[0] != ei[1]], num_nodes=n)
    perm = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    a, b = int(0.3 * n), int(0.6 * n)
    masks[0][perm[:a]], masks[1][perm[a:b]], masks[2][perm[b:]] = True, True, True
    return ClientGraph(index, torch.arange(n) + 10_000 * index, ei, x, y, *masks)


def synthetic_clients(sizes=(30, 45, 25), **kw) -> list[ClientGraph]:
    return [synthetic_client(i, n, **kw) for i, n in enumerate(sizes)]


class PyGGCN(torch.nn.Module):
    """The reference 2-layer GCN (OpenFGL / PyG style)."""

    def __init__(self, f, h, c, dropout=0.5):
        super().__init__()
        self.conv1, self.conv2, self.dropout = GCNConv(f, h), GCNConv(h, c), dropout

    def forward(self, x, edge_index):
        h = torch.relu(self.conv1(x, edge_index))
        h = torch.nn.functional.dropout(h, self.dropout, self.training)
        return self.conv2(h, edge_index)

    def load(self, params):
        self.load_state_dict({k.replace("weight", "lin.weight") if "weight" in k else k: v.clone()
                              for k, v in params.items()})
        return self

    def params(self):
        return {k.replace("lin.weight", "weight"): v.detach().clone() for k, v in self.state_dict().items()}


def batched_setup(num_seeds=2, sizes=(30, 45, 25), hidden=16, **kw):
    clients = synthetic_clients(sizes, **kw)
    f, c = clients[0].x.shape[1], int(max(int(cl.y.max()) for cl in clients)) + 1
    w0 = [init_params(f, c, hidden, seed=s) for s in range(num_seeds)]
    k = len(clients)
    init = stack_params([w for w in w0 for _ in range(k)])
    seeds = [model_seed(s, i) for s in range(num_seeds) for i in range(k)]
    client_of = [i for _ in range(num_seeds) for i in range(k)]
    return clients, init, seeds, client_of


def make_fed(parts, n=60, C=4, F=12, seed=0, train_frac=0.5, p_edge=0.12, empty_train=()):
    """Synthetic federation: class-correlated features, random undirected graph, given node parts."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % C
    centers = torch.randn(C, F, generator=g) * 2
    x = (centers[y] + torch.randn(n, F, generator=g)).abs()
    iu = torch.triu_indices(n, n, 1)
    keep = torch.rand(iu.shape[1], generator=g) < p_edge
    ei = to_undirected(iu[:, keep], num_nodes=n)
    data = Data(x=x, edge_index=ei, y=y, num_nodes=n)
    clients = []
    for k, ids in enumerate(parts):
        ids = torch.as_tensor(sorted(ids), dtype=torch.long)
        e, _ = subgraph(ids, ei, relabel_nodes=True, num_nodes=n)
        m = ids.numel()
        tr = torch.zeros(m, dtype=torch.bool)
        if k not in empty_train:
            tr[: int(train_frac * m)] = True
        va = torch.zeros(m, dtype=torch.bool)
        va[int(train_frac * m): int(0.75 * m)] = True
        te = ~(tr | va)
        clients.append(ClientGraph(k, ids, e, x[ids], y[ids], tr, va, te))
    return FederatedGraph("synthetic", data, clients, C)


PARTS3 = [range(0, 20), range(20, 40), range(40, 60)]


def fed_context(fg, seeds=(SEED,), rnd=0, start=None):
    w0 = [init_params(fg.num_features, fg.num_classes, 64, s) for s in seeds]
    ctx = FedContext(fg=fg, seeds=tuple(seeds), config=CFG, rounds=1, device=torch.device("cpu"), init=w0)
    ctx.round = rnd
    ctx.start = start if start is not None else stack_params([w for w in w0 for _ in range(fg.num_clients)])
    return ctx


def rand_params(b: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return {"conv1.weight": torch.randn(b, 4, 5, generator=g), "conv1.bias": torch.randn(b, 4, generator=g),
            "conv2.weight": torch.randn(b, 3, 4, generator=g), "conv2.bias": torch.randn(b, 3, generator=g)}


def class_means_module(cls: str, name: str, style: str = "") -> str:
    """Source text of a user's module holding one one-shot method ``cls`` (registry id ``name``):
    class-mean features up, a kNN graph of them at the server — written to a file by the tests
    that show a method in one new module runs everywhere (``style``: extra class-body lines)."""
    return textwrap.dedent(f'''
        """A user's one-shot method in one module: class-mean features up, a kNN graph of them."""
        from dataclasses import dataclass

        import torch

        from pace_nb.core.validation import Interval, param
        from pace_nb.methods.contract import register
        from pace_nb.methods.oneshot.base import OneShotMethod, SyntheticGraph, knn_graph, label_counts


        @register
        class {cls}(OneShotMethod):
            name = "{name}"
            label = "{cls}"
            paper = "a test method"
            {style}

            @dataclass(frozen=True)
            class Config:
                knn: int = param(2, Interval(int, 0, 100))

            def client_message(self, ctx, k, client):
                x, y = client.x[client.train_mask].float(), client.y[client.train_mask].long()
                counts = label_counts(client, ctx.num_classes)
                sums = torch.zeros(ctx.num_classes, x.shape[1]).index_add_(0, y, x)
                return {{"means": sums / counts.clamp_min(1).unsqueeze(1), "counts": counts}}

            def synthesize(self, ctx, messages):
                xs = torch.cat([m["means"][m["counts"] > 0] for m in messages])
                ys = torch.cat([torch.arange(ctx.num_classes)[m["counts"] > 0] for m in messages])
                return SyntheticGraph(xs, ys, knn_graph(xs, self.cfg.knn))
    ''')


def import_temp_module(tmp_path, monkeypatch, package: str, module: str, source: str):
    """Write ``source`` as ``<package>/<module>.py`` under ``tmp_path``, put ``tmp_path`` on
    ``sys.path`` and import it (registering what it declares): a user's module, for plugin tests.
    :func:`forget_temp_module` undoes the import."""
    import importlib

    pkg = tmp_path / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return importlib.import_module(f"{package}.{module}")


def forget_temp_module(package: str, module: str, *method_ids: str) -> None:
    """Drop an :func:`import_temp_module` module from ``sys.modules`` and its methods from the registry."""
    import sys

    from pace_nb.methods.registry import METHODS

    for mod in (f"{package}.{module}", package):
        sys.modules.pop(mod, None)
    for name in method_ids:
        if METHODS.registered_now(name) is not None:
            METHODS.remove(name)


def gap_entry(method: str, ours: float, paper: float, variant: str = "native", **kw) -> dict:
    """One scored table entry (a row of ``analysis.verdicts``' input) on Cora, Louvain K = 10; ``kw``
    overrides any column."""
    base = dict(row=method, col="Cora Acc", dataset="Cora", partition="louvain", num_clients=10, beta=math.nan,
                method=method, variant=variant, rank=0, metric="acc", paper_mean=paper, paper_std=math.nan,
                ours_mean=ours, ours_std=math.nan, n_seeds=5, diff=ours - paper, status="ok", n_draws=0,
                draw_min=math.nan, draw_max=math.nan)
    return {**base, **kw}
