"""OASIS (Wan et al., NeurIPS 2025, "OASIS: One-shot federated graph learning via Wasserstein
assisted knowledge integration", OpenReview FvXI7DNQfz).

Source: the paper's abstract and method outline (synergy graph synthesizer, topological
codebook, WESAD and WDSRD distillation at the server); the released code could not be
consulted, so every default below not stated in the paper is marked as ours.

Kept:

* **client** k trains its local GNN *teacher* (the matched Local GCN every protocol method
  reuses: 100 epochs of cross-entropy from the shared W0), then a *synergy graph synthesizer*
  and a *topological codebook* against that frozen teacher. The synthesizer maps
  ``[noise ‖ one-hot(y)]`` through 3 hidden layers into a ``latent_dim``-d latent space; the
  latent is vector-quantized to the nearest of ``codebook_size`` tokens (straight-through,
  van den Oord et al. 2017: codebook + β·commitment loss) and a projection head maps the
  token to node features. It uploads teacher + synthesizer + codebook weights and its label
  counts — real serialized bytes — and nothing computed from raw features;
* **server**: from every synthesizer it builds **class-balanced proxy graphs** (``proxy_nodes``
  per epoch, equal per class, a class's share split over the clients holding it in
  proportion to their counts), and distils the teachers into the global GCN with
  **WESAD** — an entropic Wasserstein distance, at temperature τ = 3, between the teachers'
  and the student's softened outputs whose ground cost is the *inter-class* affinity of the
  teachers (1 − cosine of class-mean teacher outputs), **WDSRD** — the codebook-assignment
  term: the student's hidden representation, mapped into the client's latent space, must
  fall on the token each proxy node was generated from — and the NLL of the proxy labels.

Adapted to graphs (the paper's synthesizer is written for its own GNN pipeline):

* a proxy graph's edges are the symmetric cosine kNN graph (``knn``) over its nodes'
  continuous latents, within one client's proxy graph (the "synergy" of its nodes);
* the synthesizer is trained with the teacher's cross-entropy on its proxy graph plus
  class-conditional matching of the teacher's layer-1 (topology-aware, GCN-propagated)
  representations and of the feature means against the client's own training nodes — the
  statistics stay on the client, only the trained weights travel;
* the teachers' targets on a proxy node of class c are their softened outputs weighted by
  each client's count of class c (a teacher that never saw c has no say);
* binary bag-of-words datasets get a sigmoid on the projection head (features in [0, 1]).

Defaults: τ = 3 and 20 server epochs (the paper's 10–30), ``latent_dim = 128``,
``codebook_size = 128`` (within the paper's 64–256); ours: hidden width 256, 64-d noise,
β = 0.25 (VQ-VAE's), unit loss weights, Sinkhorn ε = 0.1 with 50 iterations; an epoch is one
step on each client's freshly sampled proxy graph. ``synth_steps = 0`` leaves synthesizer and
codebook untrained.

The synthesizer's budget (1000 steps of 256 nodes at Adam 3e-3) is chosen by its training
objective alone (:meth:`Oasis.train_synthesizer`'s trace, client training nodes only;
``benchmarks/oasis_synth_budget.py``): the fewest of 200/300/500/1000 steps at which every
client's objective (mean of the last 20 steps, :func:`window_mean`) is within 5 % of its
1000-step value (:func:`settled_budget`), and the rate with the lower objective there. On Cora
(Dirichlet β = 0.05, K = 10, data seed 2024, run seed 104729; 8 clients with training nodes)
no budget below 1000 qualifies at either rate — the objective starts near 2·10³, peaks at
2·10⁵–3·10⁶ (step 21–30 at 3e-3, 45–69 at 1e-3; on the demo graph the VQ term is what grows)
and is still falling at 1000. Windowed objective
at 200/300/500/1000 steps, range over clients: 3e-3: 1.1–276 / 0.7–92 / 0.7–38 / 0.5–19
(smallest gap to step 1000 at 500: 32 %); 1e-3: 387–24 067 / 140–4 355 / 29–444 / 2.9–40.
3e-3 is lower for every client at every budget. As an outcome (not a criterion), OASIS then
reaches 60.8 % test accuracy on that federation, 13.1 MB uploaded, ~6 minutes on one thread.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, param
from pace_nb.methods.oneshot.base import (OneShotMethod, is_binary, knn_graph, label_counts, load_module,
                                          mlp, module_message)
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix
from pace_nb.methods.contract import register


# ----------------------------------------------------------------------------- pure math
def quantize(e: Tensor, codebook: Tensor, beta: float = 0.25) -> tuple[Tensor, Tensor, Tensor]:
    """VQ (van den Oord et al. 2017): nearest token (squared L2) of each row of ``e [n, d]``.
    Returns (straight-through quantized latent [n, d], token index [n],
    ``‖sg(e) − q‖² + β ‖e − sg(q)‖²`` averaged over rows)."""
    idx = torch.cdist(e.detach(), codebook.detach()).argmin(1)
    q = codebook[idx]
    loss = ((e.detach() - q) ** 2).sum(1).mean() + beta * ((e - q.detach()) ** 2).sum(1).mean()
    return e + (q - e).detach(), idx, loss


def sinkhorn(p: Tensor, q: Tensor, cost: Tensor, eps: float = 0.1, iters: int = 50) -> Tensor:
    """Entropic optimal transport cost ``⟨T, cost⟩`` between the rows of ``p, q [n, C]``
    (histograms) with ground cost ``cost [C, C]``; log-domain Sinkhorn, differentiable."""
    log_k = -cost / eps
    log_p, log_q = p.clamp_min(1e-12).log(), q.clamp_min(1e-12).log()
    f = torch.zeros_like(p)
    g = torch.zeros_like(q)
    for _ in range(int(iters)):
        f = log_p - torch.logsumexp(log_k[None] + g[:, None, :], dim=2)
        g = log_q - torch.logsumexp(log_k[None] + f[:, :, None], dim=1)
    plan = (f[:, :, None] + log_k[None] + g[:, None, :]).exp()
    return (plan * cost[None]).sum((1, 2))


def class_cost(prototypes: Tensor) -> Tensor:
    """Inter-class ground cost ``1 − cos(a_i, a_j)`` (zero diagonal) of class prototypes [C, d]."""
    a = F.normalize(prototypes, dim=1)
    cost = (1.0 - a @ a.T).clamp_min(0.0)
    return cost.fill_diagonal_(0.0)


def wesad_loss(teacher_probs: Tensor, student_logits: Tensor, cost: Tensor, temperature: float,
               eps: float = 0.1, iters: int = 50) -> Tensor:
    """WESAD: mean Wasserstein distance (ground cost = inter-class cost) between the teachers'
    softened targets and ``softmax(student / τ)``."""
    return sinkhorn(teacher_probs, F.softmax(student_logits / temperature, 1), cost, eps, iters).mean()


def assignment_logits(z: Tensor, codebook: Tensor) -> Tensor:
    """Token-assignment logits ``−‖z − t_m‖²`` [n, M] (the WDSRD codebook-assignment term's scores)."""
    return -torch.cdist(z, codebook) ** 2


def split(weights: Tensor, total: int) -> Tensor:
    """Integer split of ``total`` proportional to ``weights`` (largest remainders, exact sum;
    unlike :func:`~.base.allocate` a tiny weight may get 0, so class totals stay equal)."""
    w = weights.double().clamp_min(0)
    if float(w.sum()) <= 0:
        return torch.zeros_like(w, dtype=torch.long)
    raw = w / w.sum() * int(total)
    out = raw.floor().long()
    out[torch.argsort(raw - out.double(), descending=True, stable=True)[:int(total) - int(out.sum())]] += 1
    return out


def balanced_allocation(counts: Tensor, total: int) -> Tensor:
    """Proxy nodes per (client, class) [K, C]: ``total`` split equally over the held classes,
    each class's share split over the clients in proportion to their counts ``counts [K, C]``."""
    held = counts.sum(0) > 0
    per_class = split(held.float(), int(total))
    out = torch.zeros_like(counts, dtype=torch.long)
    for c in torch.nonzero(held).flatten().tolist():
        out[:, c] = split(counts[:, c], int(per_class[c]))
    return out


def window_mean(trace: Tensor, step: int, window: int = 20) -> float:
    """Mean of ``trace[step − window : step]`` — the objective around step ``step`` of a noisy
    (fresh noise every step) training trace."""
    if not 1 <= int(step) <= len(trace):
        raise ValueError(f"step must be in [1, {len(trace)}], got {step}")
    return float(trace[max(0, int(step) - int(window)):int(step)].mean())


def settled_budget(traces: Sequence[Tensor], budgets: Sequence[int], tol: float = 0.05, window: int = 20) -> int | None:
    """The fewest steps in ``budgets`` at which every trace's windowed objective is within
    ``tol`` (relative) of its value at the traces' last step; ``None`` when none is."""
    for b in sorted(int(v) for v in budgets):
        if all(window_mean(t, b, window) <= window_mean(t, len(t), window) + tol * abs(window_mean(t, len(t), window))
               for t in traces):
            return b
    return None


# ----------------------------------------------------------------------------- synthesizer
class Synthesizer(torch.nn.Module):
    """``[z ‖ one-hot(y)]`` → 3 hidden layers (the last = the ``latent`` space) → VQ → projection head."""

    def __init__(self, noise_dim: int, num_classes: int, hidden: int, latent: int, num_features: int, seed: int):
        super().__init__()
        self.noise_dim, self.num_classes = int(noise_dim), int(num_classes)
        self.trunk = mlp([noise_dim + num_classes, hidden, hidden, latent], seed)
        self.head = mlp([latent, num_features], seed + 1)

    def latent(self, y: Tensor, generator: torch.Generator) -> Tensor:
        z = torch.randn(len(y), self.noise_dim, generator=generator)
        return self.trunk(torch.cat([z, F.one_hot(y, self.num_classes).float()], 1))

    def features(self, q: Tensor, binary: bool) -> Tensor:
        out = self.head(q)
        return torch.sigmoid(out) if binary else out


def proxy_graph(synth: Synthesizer, codebook: Tensor, y: Tensor, binary: bool, knn: int, gen: torch.Generator,
                beta: float = 0.25):
    """One proxy graph: (features, P, continuous latent, token index, VQ loss)."""
    e = synth.latent(y, gen)
    q, idx, vq = quantize(e, codebook, beta)
    x = synth.features(q, binary)
    return x, propagation_matrix(knn_graph(e.detach(), knn), len(y)), e, idx, vq


def class_means(v: Tensor, y: Tensor, classes: Tensor) -> Tensor:
    """Mean of the rows of ``v`` per class in ``classes`` → [len(classes), d]."""
    return torch.stack([v[y == c].mean(0) for c in classes.tolist()])


@register
class Oasis(OneShotMethod):
    """OASIS: teacher + synthesizer + topological codebook per client → WESAD/WDSRD distillation."""

    name = "oasis"
    label = "OASIS"
    colour, marker = "#228833", "v"
    paper_rows = {"oneshot": 4}  # its rows in the papers' tables
    quick_params = {"synth_steps": 5, "epochs": 2, "proxy_nodes": 100, "batch_nodes": 64}  # fast on a small graph (conformance checks)
    paper = "Wan et al. 2025 (NeurIPS), OASIS: one-shot FGL via Wasserstein assisted knowledge integration"
    uses_local = True

    @dataclass(frozen=True)
    class Config:
        codebook_size: int = param(128, Interval(int, 1, 65_536))
        latent_dim: int = param(128, Interval(int, 1, 16_384))
        noise_dim: int = param(64, Interval(int, 1, 4096))
        synth_hidden: int = param(256, Interval(int, 1, 16_384))
        synth_steps: int = param(1000, Interval(int, 0, 100_000))
        batch_nodes: int = param(256, Interval(int, 2, 1_000_000))
        synth_lr: float = param(3e-3, Interval(float, 0.0, 10.0, closed="right"))
        commitment: float = param(0.25, Interval(float, 0.0, None))
        lambda_stat: float = param(1.0, Interval(float, 0.0, None))
        epochs: int = param(20, Interval(int, 0, 100_000))
        proxy_nodes: int = param(1000, Interval(int, 1, 1_000_000))
        knn: int = param(5, Interval(int, 0, 1000))
        temperature: float = param(3.0, Interval(float, 0.0, None, closed="neither"))
        lambda_wesad: float = param(1.0, Interval(float, 0.0, None))
        lambda_code: float = param(1.0, Interval(float, 0.0, None))
        sinkhorn_eps: float = param(0.1, Interval(float, 0.0, None, closed="neither"))
        sinkhorn_iters: int = param(50, Interval(int, 1, 10_000))

    def _synthesizer(self, ctx, seed: int) -> Synthesizer:
        cfg = self.cfg
        return Synthesizer(cfg.noise_dim, ctx.num_classes, cfg.synth_hidden, cfg.latent_dim, ctx.num_features, seed)

    def train_synthesizer(self, ctx, k, client) -> tuple[Synthesizer, Tensor, Tensor, Tensor]:
        """Client k's synthesizer and codebook trained against its frozen teacher; returns
        (synthesizer, codebook, label counts, trace) where ``trace [synth_steps]`` is the
        training objective at each step (before that step's update; training nodes only)."""
        cfg, c = self.cfg, ctx.num_classes
        teacher = {n: ctx.local[k][n].detach() for n in WEIGHT_KEYS}
        x, y, tr = client.x.float(), client.y.long(), client.train_mask
        binary = is_binary(client.x)
        with torch.no_grad():
            _, h_real = gcn_forward(teacher, x, propagation_matrix(client.edge_index, client.num_nodes), return_hidden=True)
        counts = label_counts(client, c)
        held = torch.nonzero(counts > 0).flatten()
        mu_h, mu_x = class_means(h_real[tr], y[tr], held), class_means(x[tr], y[tr], held)
        gen = ctx.generator(k, salt=11)
        synth = self._synthesizer(ctx, int(ctx.generator(k, salt=12).initial_seed()) % (2**31))
        nb = max(cfg.batch_nodes, len(held))  # every held class in every batch
        batch = held.repeat_interleave(-(-nb // len(held)))[:nb]
        with torch.no_grad():  # tokens start on latents of a first draw (k-means style init)
            start = synth.latent(held.repeat_interleave(-(-cfg.codebook_size // len(held)))[:cfg.codebook_size], gen)
        codebook = torch.nn.Parameter(start.clone())

        def step_loss() -> Tensor:
            xs, P, _, _, vq = proxy_graph(synth, codebook, batch, binary, cfg.knn, gen, cfg.commitment)
            logits, h = gcn_forward(teacher, xs, P, return_hidden=True)
            stat = ((class_means(h, batch, held) - mu_h) ** 2).sum(1).mean() + \
                ((class_means(xs, batch, held) - mu_x) ** 2).sum(1).mean()
            return F.cross_entropy(logits, batch) + cfg.lambda_stat * stat + vq

        trace = torch.zeros(cfg.synth_steps)
        if cfg.synth_steps > 0:
            opt = torch.optim.Adam(list(synth.parameters()) + [codebook], lr=cfg.synth_lr)
            for t in range(cfg.synth_steps):
                opt.zero_grad()
                loss = step_loss()
                loss.backward()
                opt.step()
                trace[t] = loss.detach()
        return synth, codebook.detach().clone(), counts, trace

    def client_message(self, ctx, k, client):
        synth, codebook, counts, _ = self.train_synthesizer(ctx, k, client)
        return {**{f"teacher.{n}": ctx.local[k][n].detach() for n in WEIGHT_KEYS}, **module_message("synth", synth),
                "codebook": codebook, "counts": counts,
                "binary": torch.tensor([float(is_binary(client.x))])}

    def synthesize(self, ctx, messages):
        return None  # proxy graphs are drawn afresh every epoch inside server_train

    def proxy_graphs(self, ctx, messages, synths: list[Synthesizer], gen: torch.Generator):
        """One epoch's class-balanced proxy graphs: per client (x, P, y, token index), or ``None``
        for a client with no share."""
        counts = torch.stack([m["counts"] for m in messages])
        alloc = balanced_allocation(counts, self.cfg.proxy_nodes)
        out: list[tuple[Any, Any, Tensor, Any] | None] = []
        for m, synth, a in zip(messages, synths, alloc, strict=True):
            y = torch.repeat_interleave(torch.arange(ctx.num_classes), a)
            if not len(y):
                out.append(None)
                continue
            with torch.no_grad():
                x, P, _, idx, _ = proxy_graph(synth, m["codebook"], y, float(m["binary"][0]) > 0.5, self.cfg.knn, gen)
            out.append((x, P, y, idx))
        return out

    def server_train(self, ctx, messages, graph):
        cfg, c = self.cfg, ctx.num_classes
        teachers = [{n: m[f"teacher.{n}"] for n in WEIGHT_KEYS} for m in messages]
        synths = [load_module("synth", self._synthesizer(ctx, 0), m).eval() for m in messages]
        counts = torch.stack([m["counts"] for m in messages])
        weight = counts / counts.sum(0, keepdim=True).clamp_min(1.0)  # [K, C]: teacher j's say on class c
        gen = ctx.generator(-1, salt=13)

        def targets(x, P, y):
            probs = torch.stack([F.softmax(gcn_forward(t, x, P) / cfg.temperature, 1) for t in teachers])
            return (weight[:, y, None] * probs).sum(0)

        with torch.no_grad():  # inter-class cost from the teachers' class-mean outputs on a first draw
            first = [g for g in self.proxy_graphs(ctx, messages, synths, gen) if g is not None]
            ys = torch.cat([g[2] for g in first])
            proto = torch.cat([targets(g[0], g[1], g[2]) for g in first])
            seen = torch.bincount(ys, minlength=c) > 0
            means = torch.zeros(c, c).index_add_(0, ys, proto) / torch.bincount(ys, minlength=c).clamp_min(1)[:, None]
            cost = class_cost(torch.where(seen[:, None], means, torch.eye(c)))
        student = {n: v.clone().requires_grad_(True) for n, v in ctx.init_model().items()}
        heads = [mlp([ctx.config.hidden, cfg.latent_dim], int(gen.initial_seed()) % (2**31) + j)
                 for j in range(len(messages))]
        params = list(student.values()) + [p for h in heads for p in h.parameters()]
        opt = torch.optim.Adam(params, lr=ctx.config.lr, weight_decay=ctx.config.weight_decay)
        drop = ctx.generator(-1, salt=14)
        for _ in range(cfg.epochs):
            for j, g in enumerate(self.proxy_graphs(ctx, messages, synths, gen)):
                if g is None:
                    continue
                x, P, y, idx = g
                with torch.no_grad():
                    target = targets(x, P, y)
                logits, h = gcn_forward(student, x, P, dropout=ctx.config.dropout, training=True, generator=drop,
                                        return_hidden=True)
                loss = F.cross_entropy(logits, y) \
                    + cfg.lambda_wesad * wesad_loss(target, logits, cost, cfg.temperature, cfg.sinkhorn_eps, cfg.sinkhorn_iters) \
                    + cfg.lambda_code * F.cross_entropy(assignment_logits(heads[j](h), messages[j]["codebook"]), idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return {n: v.detach() for n, v in student.items()}
