"""GHOST (Qian et al., ICML 2025, PMLR 267): one-shot FGL with client proxy generators and
topology-consistency parameter consolidation at the server.

Source: the paper and the authors' released code (``algorithm/GHOST.py``, ``utils/utils.py``,
``args.py``, ``algorithm/Base.py``); the defaults below are the released ``args.py`` values.

Kept:

* **client proxy** (``GHOSTClient.train``): a conditional generator ``G(z, y)`` — a label
  embedding ``Embedding(C, C)`` concatenated with noise ``z ~ N(0, I_64)``, three
  ``Linear–Tanh–Dropout(0.2)`` layers of widths 64/128/256 and a linear output of the feature
  width — is trained for ``T_L = 100`` Adam steps (lr 5e-3, weight decay 4e-4), fresh noise per
  step, so that node i's proxy ``G(z_i, y_i)`` reproduces node i's real features:
  ``λ_d · KL(softmax(x_i) ‖ softmax(x̂_i)) + (1 − cos(x̂_i, x_i))`` (:func:`feature_loss`,
  λ_d = 0.05) plus ``λ_f = 0.1`` times the **fused Gromov–Wasserstein** distance (α = 0.5,
  uniform weights, square loss, exact conditional-gradient solver) between the real graph
  (adjacency, features) and the proxy graph (its kNN adjacency, the generated features)
  (:func:`fgw_loss`). The proxy graph connects every node to its top-5 cosine neighbours
  counting itself (``construct_graph``). The client uploads the generator's weights and its
  node count once — no GNN, no data;
* **server integration** (``GHOSTServer.aggregate``): clients are visited in a random order;
  each is visited ``M = 3`` times; a visit draws as many nodes as the client holds with
  **class-balanced labels** (``gen_y_noise``: ⌊n/C⌋ per class, the rest to the last class,
  shuffled), builds the proxy graph, computes the **Topology-Consistency Criterion**
  ``Ω = ∇_θ Σ_(i,j)∈E e_ij²`` with ``e_ij = ⟨h_i W₁, tanh(h_j W₁)⟩`` over the layer-1 output h
  (``compute_criterion``; :func:`topology_criterion`) and takes ``T_G = 5`` Adam steps of
  ``NLL + λ_r Σ_(s<t) |Ω_s| (θ − θ*_s)²`` (:func:`retention_penalty`; θ*_s the parameters after
  visit s). ``λ_r = 1e-11`` is the released ``lambda_r · r_scale``. One Adam state spans the
  whole integration, as in the released server. There is **no replay** of earlier proxies:
  the server's optimisation only ever sees the current visit's generated graph.

Adapted (and why):

* the global model is the shared 2-layer GCN of every method here (hidden width, dropout, lr
  and weight decay from the protocol's ``TrainConfig``, evaluated on the complete graph); the
  released server used its own GCN (hidden 128, dropout 0.3, Adam 1e-2, weight decay 4e-4);
* the client's proxy is generated for its **training** nodes only: the released code feeds
  every node's label to the generator but its losses (and the adjacency blocks it compares)
  only read the training nodes, so only training labels are used here (non-training labels
  are not the client's to use). The proxy's kNN graph is built among those nodes;
* the released code compares the real adjacency with ``to_dense_adj(proxy) // 2``, which —
  self loops being listed twice — reduces the proxy adjacency to the identity; here the proxy
  kNN adjacency (no self loops, like the real one) is compared, as the paper describes;
* the released criterion is read from ``param.grad`` without zeroing it first (so it also
  holds the previous visit's last training gradient); here Ω is the criterion's own gradient;
  the released ``λ_n · Σ ‖Ω‖`` term is a constant float (no gradient) and is left out;
* the released generator is never switched to eval mode, so its dropout is also active when
  the server samples; kept. Dropout masks and noise come from seeded generators (determinism).
* FGW: POT's ``ot.gromov.fused_gromov_wasserstein2`` (the released ``GW_utils`` wraps the same
  POT solver, with its default iteration caps, as here); its gradient reaches the generated
  features through the feature cost ``M``. The released code solves it in float32 (its tensors
  are); here it is float64 by default and ``fgw_dtype="float32"`` is the released precision.
  Float32 does not pay on CPU: POT's exact network simplex, which solves every linearized
  problem in float64 either way, dominates each call (one PubMed client, 596 training nodes,
  100 generator steps: 230.0 CPU s in float64, 225.9 in float32, ``benchmarks/ghost_fgw.py``),
  and the two precisions give the same accuracy up to the run-to-run spread of the generator's
  training (Cora and CiteSeer, three data seeds each).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.oneshot.base import (OneShotMethod, adam_steps, knn_graph, load_module, module_message,
                                          module_shapes)
from pace_nb.methods.phases import PublicView
from pace_nb.nn.gcn import Params, dropout_mask, gcn_forward, propagation_matrix
from pace_nb.methods.contract import register

#: the released generator's hidden widths (``utils.Generator``: dims = [noise + C, 64, 128, 256])
GEN_HIDDEN = (64, 128, 256)


# ----------------------------------------------------------------------------- pure functions
def feature_loss(pred: Tensor, real: Tensor, lambda_d: float) -> Tensor:
    """``λ_d · KL(softmax(real) ‖ softmax(pred))`` (batch mean) ``+ 1 − mean_i cos(pred_i, real_i)``
    (released ``utils.feature_loss``)."""
    kl = F.kl_div(F.log_softmax(pred, 1), F.softmax(real, 1), reduction="batchmean")
    return lambda_d * kl + 1.0 - F.cosine_similarity(pred, real, dim=-1).mean()


def fgw_loss(a_real: Tensor, a_proxy: Tensor, x_real: Tensor, x_proxy: Tensor, alpha: float = 0.5,
             dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Tensor:
    """Fused Gromov–Wasserstein distance (square loss, uniform weights) between the graphs
    ``(a_real, x_real)`` and ``(a_proxy, x_proxy)``: ``min_T (1−α)⟨M, T⟩ + α Σ (A_ik − B_jl)² T_ij T_kl``
    with ``M_ij = ‖x_real_i − x_proxy_j‖²`` (released ``utils.gw_distance_loss``). Differentiable in
    the features (envelope theorem) through POT's torch backend. ``dtype``: the solver's precision
    (float32 is what the released GHOST runs: its tensors are float32; POT's network simplex
    solves each linearized problem in float64 either way). ``device``: where the solver's products run
    (e.g. ``cuda``; default: the inputs' device); the value comes back on ``x_proxy``'s device."""
    import ot

    n, m = a_real.shape[0], a_proxy.shape[0]
    if n == 0 or m == 0:
        return x_proxy.sum() * 0.0
    dev = x_proxy.device if device is None else torch.device(device)
    xr, xp = x_real.to(dev, dtype), x_proxy.to(dev, dtype)
    M = torch.cdist(xr, xp) ** 2
    p = torch.full((n,), 1.0 / n, dtype=dtype, device=dev)
    q = torch.full((m,), 1.0 / m, dtype=dtype, device=dev)
    val = ot.gromov.fused_gromov_wasserstein2(M, a_real.to(dev, dtype), a_proxy.to(dev, dtype), p, q,
                                              loss_fun="square_loss", alpha=float(alpha))
    return val.to(x_proxy.device, x_proxy.dtype)


def balanced_labels(n: int, num_classes: int, rng: torch.Generator) -> Tensor:
    """Class-balanced labels in random order: ⌊n/C⌋ of each class, the remainder to the last
    class (released ``utils.gen_y_noise``)."""
    counts = torch.full((num_classes,), n // num_classes, dtype=torch.long)
    counts[-1] += n - int(counts.sum())
    y = torch.repeat_interleave(torch.arange(num_classes), counts)
    return y[torch.randperm(n, generator=rng)]


def proxy_edges(x: Tensor, k: int) -> Tensor:
    """The proxy graph: each node joined to its top-``k`` cosine neighbours *counting itself*
    (``construct_graph``), symmetrised; [2, e] without self loops (the GCN adds them)."""
    return knn_graph(x, int(k) - 1)


def dense_adjacency(edge_index: Tensor, n: int) -> Tensor:
    """0/1 adjacency [n, n] of ``edge_index`` (duplicates merged), on its device."""
    a = torch.zeros(n, n, device=edge_index.device)
    a[edge_index[0], edge_index[1]] = 1.0
    return a


def induced_adjacency(edge_index: Tensor, mask: Tensor) -> Tensor:
    """Dense adjacency of the subgraph induced by ``mask`` (in mask order), built without the full n×n matrix."""
    idx = torch.full((mask.numel(),), -1, dtype=torch.long)
    idx[mask] = torch.arange(int(mask.sum()))
    src, dst = idx[edge_index[0]], idx[edge_index[1]]
    keep = (src >= 0) & (dst >= 0)
    return dense_adjacency(torch.stack([src[keep], dst[keep]]), int(mask.sum()))


def topology_criterion(theta: Params, x: Tensor, edge_index: Tensor) -> Params:
    """Topology-Consistency Criterion: ``Ω = ∇_θ Σ_(i,j) e_ij²``, ``e_ij = ⟨h_i W₁, tanh(h_j W₁)⟩``,
    h the layer-1 GCN output, summed over the proxy graph's edges and its self loops listed
    twice, as the released edge list holds them (``utils.compute_criterion``/``construct_graph``).
    Only the layer-1 parameters receive a criterion."""
    th = {k: v.detach().clone().requires_grad_(k.startswith("conv1.")) for k, v in theta.items()}
    n = x.shape[0]
    P = propagation_matrix(edge_index, n)
    w1 = th["conv1.weight"]
    h = F.relu(torch.sparse.mm(P, x @ w1.t()) + th["conv1.bias"])
    loops = torch.arange(n).repeat(2, 2)
    src, dst = torch.cat([edge_index, loops], 1)
    a = h @ w1
    e = (a.index_select(0, src) * torch.tanh(a.index_select(0, dst))).sum(1)  # index_add_ backward: no atomics
    keys = [k for k in th if th[k].requires_grad]
    grads = torch.autograd.grad((e ** 2).sum(), [th[k] for k in keys])
    return {k: g.detach() for k, g in zip(keys, grads, strict=True)}


def retention_penalty(theta: Params, anchors: list[Params], criteria: list[Params]) -> Tensor:
    """``Σ_s Σ_i |Ω_s,i| (θ_i − θ*_s,i)²`` over the earlier visits s (released ``loss_retention``)."""
    total = torch.zeros(())
    for anchor, omega in zip(anchors, criteria, strict=True):
        for k, w in omega.items():
            total = total + (w.abs() * (theta[k] - anchor[k]) ** 2).sum()
    return total


class ProxyGenerator(torch.nn.Module):
    """The released ``utils.Generator``: ``[Embedding(y), z] → (Linear–Tanh–Dropout)×3 → Linear``;
    dropout masks are drawn from an explicit generator (always active, as released)."""

    def __init__(self, noise_dim: int, num_features: int, num_classes: int, dropout: float, seed: int):
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            self.emb = torch.nn.Embedding(num_classes, num_classes)
            dims = (noise_dim + num_classes, *GEN_HIDDEN)
            self.hidden = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
            self.out = torch.nn.Linear(dims[-1], num_features)
        self.noise_dim, self.dropout = int(noise_dim), float(dropout)

    def forward(self, z: Tensor, y: Tensor, rng: torch.Generator) -> Tensor:
        h = torch.cat([self.emb(y), z], 1)
        for layer in self.hidden:
            h = torch.tanh(layer(h))
            if self.dropout > 0:
                h = h * dropout_mask(h.shape, self.dropout, rng, h.device, h.dtype)
        return self.out(h)

    def sample(self, y: Tensor, rng: torch.Generator) -> Tensor:
        return self(torch.randn(len(y), self.noise_dim, generator=rng), y, rng)


# ----------------------------------------------------------------------------- the method
@register
class Ghost(OneShotMethod):
    """GHOST: per-client proxy generators (feature + FGW losses) → sequential, criterion-consolidated server."""

    name = "ghost"
    label = "GHOST"
    colour, marker = "#EE6677", "p"
    paper_rows = {"oneshot": 3}  # its rows in the papers' tables
    quick_params = {"gen_steps": 5, "visits": 1, "visit_steps": 1}  # fast on a small graph (conformance checks)
    paper = "Qian et al. 2025 (ICML), GHOST: one-shot federated graph learning"

    @dataclass(frozen=True)
    class Config:
        gen_steps: int = param(100, Interval(int, 0, 100_000))          # T_L
        gen_lr: float = param(0.005, Interval(float, 0.0, 10.0, closed="right"))         # learning_rate
        gen_weight_decay: float = param(4e-4, Interval(float, 0.0, 1.0))
        noise_dim: int = param(64, Interval(int, 1, 4096))
        gen_dropout: float = param(0.2, Interval(float, 0.0, 1.0, closed="left"))
        lambda_d: float = param(0.05, Interval(float, 0.0, None))
        lambda_f: float = param(0.1, Interval(float, 0.0, None))         # lambda_f · f_scale
        fgw_alpha: float = param(0.5, Interval(float, 0.0, 1.0))
        fgw_dtype: str = param("float64", Options(("float64", "float32")),
                               help="FGW solver precision (float32: the released code's; as fast here, see module doc)")
        knn: int = param(5, Interval(int, 1, 1000))                  # top-k counting the node itself
        visits: int = param(3, Interval(int, 0, 10_000))               # M
        visit_steps: int = param(5, Interval(int, 0, 100_000))          # T_G
        lambda_r: float = param(1e-11, Interval(float, 0.0, None))       # lambda_r · r_scale

    def generator(self, ctx, seed: int) -> ProxyGenerator:
        return ProxyGenerator(self.cfg.noise_dim, ctx.num_features, ctx.num_classes, self.cfg.gen_dropout, seed)

    def client_message(self, ctx, k, client):
        cfg = self.cfg
        mask = client.train_mask
        x_tr, y_tr = client.x[mask].float(), client.y[mask].long()
        a_real = induced_adjacency(client.edge_index, mask)
        gen = self.generator(ctx, int(ctx.generator(k).initial_seed()))
        rng = ctx.generator(k, salt=4)

        def loss():
            x = gen.sample(y_tr, rng)
            a_proxy = dense_adjacency(proxy_edges(x.detach(), cfg.knn), len(y_tr))
            return (feature_loss(x, x_tr, cfg.lambda_d)
                    + cfg.lambda_f * fgw_loss(a_real, a_proxy, x_tr, x, cfg.fgw_alpha, getattr(torch, cfg.fgw_dtype),
                                             ctx.device))

        adam_steps(gen.parameters(), loss, cfg.gen_steps, cfg.gen_lr, cfg.gen_weight_decay)
        return {**module_message("generator", gen), "nodes": torch.tensor([float(client.num_nodes)])}

    def budget(self) -> str:
        c = self.cfg
        return (f"released budget: {c.gen_steps} generator steps per client, each with exact FGW ({c.fgw_dtype}) over "
                f"its training nodes; server {c.visits} visits x {c.visit_steps} steps per client")

    def upload_shapes(self, num_features, num_classes, hidden=None):
        gen = self.generator(PublicView(num_features, num_classes, 0), 0)
        return {**module_shapes("generator", gen), "nodes": (1,)}

    def synthesize(self, ctx, messages):
        return None  # GHOST generates a fresh proxy graph at every visit (server_train)

    def server_train(self, ctx, messages, graph):
        cfg, tc = self.cfg, ctx.config
        gens = [load_module("generator", self.generator(ctx, 0), m) for m in messages]
        rng = ctx.generator(-1, salt=5)
        drop = ctx.generator(-1, salt=6)
        theta = {k: v.clone().requires_grad_(True) for k, v in ctx.init_model().items()}
        opt = torch.optim.Adam(list(theta.values()), lr=tc.lr, weight_decay=tc.weight_decay)
        anchors: list[Params] = []
        criteria: list[Params] = []
        for i in torch.randperm(len(messages), generator=rng).tolist():
            n = int(messages[i]["nodes"][0])
            for _ in range(cfg.visits):
                with torch.no_grad():
                    y = balanced_labels(n, ctx.num_classes, rng)
                    x = gens[i].sample(y, rng)
                edges = proxy_edges(x, cfg.knn)
                P = propagation_matrix(edges, n)
                criteria.append(topology_criterion(theta, x, edges))
                for _ in range(cfg.visit_steps):
                    opt.zero_grad()
                    z = gcn_forward(theta, x, P, dropout=tc.dropout, training=True, generator=drop)
                    loss = F.cross_entropy(z, y)
                    if anchors and cfg.lambda_r > 0:
                        loss = loss + cfg.lambda_r * retention_penalty(theta, anchors, criteria[:-1])
                    loss.backward()
                    opt.step()
                anchors.append({k: v.detach().clone() for k, v in theta.items()})
        return {k: v.detach() for k, v in theta.items()}
