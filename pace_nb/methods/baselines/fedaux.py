"""FedAux-1R: the first personalized aggregate of FedAux (Zhuo, Zhan & Yu, NeurIPS 2025).

FedAux attaches a learnable auxiliary projection vector ``a`` (dimension = hidden width,
N(0, I) init shared through the global model) to each client's GNN: node embeddings ``h_v``
are scored ``s_v = cos(h_v, a)`` and smoothed with a Gaussian kernel on the 1-D scores,
``z_v = Σ_u κ(s_v, s_u) h_u / Σ_u κ(s_v, s_u)``, ``κ = exp(−(s_v − s_u)² / σ²)`` (their Eq. 3).

* ``head="concat"`` (default, the released architecture): the classifier reads ``[h ‖ z]``;
  on PACE's 2-layer GCN ``h`` is the layer-1 output and the classifier is conv2 with weight
  ``[W_h | W_z]``: ``logits = P (h W_hᵀ + z W_zᵀ) + b`` (``W_h`` = W0's conv2, ``W_z`` =
  ``conv2.zweight``, glorot from the run seed). Training minimises CE of these logits (the
  trainer's plain-GCN CE is swapped for it exactly), evaluation uses the same forward.
* ``head="aux"`` (the earlier adaptation): the deployed model is the plain GCN and ``z`` feeds
  conv2 as an auxiliary head, loss ``CE(GCN(x)) + aux_weight · CE(conv2(z))``.

Server (released): ``S_ij = exp(10 · cos(θ_i, θ_j))`` over **all** shared parameters,
auxiliary vector included (``similarity="params"``; ``"aux"`` compares ``a`` only),
row-normalized; receiver i gets ``Σ_j S_ij θ_j``.
The kernel smoothing is computed exactly-in-float with a rank-(M+1) Taylor factorization of
``exp(2 s_v s_u / σ²)`` (no dense n × n kernel; M the smallest order below float32 resolution),
and — being linear over rows — applied to the classifier's C-column projection ``h W_zᵀ`` rather
than to ``h`` itself (:func:`smoothed_projection`; the same value, far fewer passes over the hidden layer).
FedAux-1R = one round: 100 local epochs from W0 (+ a₀), one upload, the first personalized
aggregate, no post-return training.
Defaults: σ = 1 (FedAux's parser), scale 10.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.nn.gcn import _SpMM, effective_weight, gcn_forward, propagation_matrix, to_csr
from pace_nb.nn.training import TrainStep
from pace_nb.methods.baselines.base import FedContext, FederatedMethod, mix
from pace_nb.methods.baselines.fedpub import similarity_diagonal, similarity_weights
from pace_nb.methods.contract import register

AUX_KEY = "aux"
ZW_KEY = "conv2.zweight"
HEADS = ("concat", "aux")
SIMILARITIES = ("params", "aux")


def taylor_order(sigma: float) -> int:
    """Smallest Taylor order M whose remainder bound ``(2/σ²)^{M+1}/(M+1)!`` on ``exp(2 s_v s_u/σ²)``
    (|s| ≤ 1) is below float32's resolution ``2⁻²⁴`` of that factor's smallest value ``exp(−2/σ²)``
    (σ = 1: M = 15)."""
    x, term, m = 2.0 / sigma**2, 1.0, 0
    while True:
        term *= x / (m + 1)  # (2/σ²)^{m+1}/(m+1)!
        if term <= 2.0**-24 * math.exp(-x):
            return m
        m += 1


def _features(s: Tensor, sigma: float, order: int) -> Tensor:
    m = torch.arange(1, order + 1, dtype=s.dtype, device=s.device)
    step = ((math.sqrt(2.0) / sigma) * s).unsqueeze(-1) / m.sqrt()  # φ_m / φ_{m-1}
    base = torch.exp(-(s * s) / sigma**2).unsqueeze(-1)
    return torch.cat([base, step], -1).cumprod(-1)


class _KernelFeatures(torch.autograd.Function):
    """φ(s) with its closed-form derivative ``φ'_m = −(2s/σ²) φ_m + (√2/σ) √m φ_{m−1}`` (φ_{−1} = 0):
    two product-sums over [..., n, M+1] instead of a running product's backward (flips, cumulative
    sums and zero checks)."""

    @staticmethod
    def forward(ctx, s: Tensor, sigma: float, order: int) -> Tensor:
        phi = _features(s, sigma, order)
        ctx.save_for_backward(s, phi)
        ctx.sigma = sigma
        return phi

    @staticmethod
    def backward(ctx, g: Tensor):
        s, phi = ctx.saved_tensors
        sigma = ctx.sigma
        root = torch.arange(1, phi.shape[-1], dtype=phi.dtype, device=phi.device).sqrt()
        up = (g[..., 1:] * phi[..., :-1] * root).sum(-1)
        return (math.sqrt(2.0) / sigma) * up - (2.0 / sigma**2) * s * (g * phi).sum(-1), None, None


def kernel_features(s: Tensor, sigma: float, order: int) -> Tensor:
    """``φ(s) [..., n, M+1]``, ``φ_m(s) = exp(−s²/σ²) (√2 s/σ)^m / √(m!)``, so that
    ``φ(s_v)·φ(s_u) = exp(−(s_v − s_u)²/σ²)`` up to the Taylor remainder of ``exp(2 s_v s_u / σ²)``
    (|s| ≤ 1: remainder ≤ (2/σ²)^{M+1}/(M+1)!); the powers as one running product over m, the
    gradient in closed form (:class:`_KernelFeatures`)."""
    return _KernelFeatures.apply(s, float(sigma), int(order))


def _cosine(num: Tensor, norm: Tensor, eps: float = 1e-8) -> Tensor:
    """``num / max(norm, eps)`` with the clamp outside autograd (ATen's cosine): ``num = h·â``, ``norm = ‖h‖``."""
    return num / (norm + (norm.clamp_min(eps) - norm).detach())


def cosine_to(h: Tensor, a: Tensor, eps: float = 1e-8) -> Tensor:
    """``cos(h_v, a)`` for every row of ``h`` [..., n, d] (``a`` [..., d]): ``F.cosine_similarity``'s value
    and gradient (the norms clamped at ``eps`` outside autograd, as ATen does), as one product-sum over
    ``d`` — a backward of a few passes over ``h`` instead of about ten."""
    return _cosine((h * F.normalize(a, dim=-1).unsqueeze(-2)).sum(-1), torch.linalg.vector_norm(h, dim=-1), eps)


def _smooth(s: Tensor, v: Tensor, sigma: float, order: int | None) -> Tensor:
    """``κ v / κ 1`` with ``κ_vu = exp(−(s_v − s_u)²/σ²)`` over the rows of ``v`` [..., n, c] — factorized,
    products of matrices only (no dense n × n kernel, no matrix-vector bmm)."""
    phi = kernel_features(s, sigma, taylor_order(sigma) if order is None else order)
    den = (phi * phi.sum(-2, keepdim=True)).sum(-1, keepdim=True)  # row v: Σ_u κ_vu = φ(s_v)·Σ_u φ(s_u)
    return (phi @ (phi.transpose(-1, -2) @ v)) / den


def kernel_smooth(h: Tensor, a: Tensor, sigma: float = 1.0, order: int | None = None) -> Tensor:
    """FedAux's kernel aggregation ``z = κ h / κ 1`` with ``κ_vu = exp(−(s_v − s_u)²/σ²)``,
    ``s = cos(h, a)`` — factorized, O(n · M · d) (``order`` None: :func:`taylor_order`). ``h`` [..., n, d],
    ``a`` [..., d] (leading dims: models, each smoothed over its own n rows)."""
    return _smooth(cosine_to(h, a), h, sigma, order)


def smoothed_projection(h: Tensor | Sequence[Tensor], a: Tensor, w: Tensor, sigma: float = 1.0,
                        order: int | None = None) -> Tensor:
    """``kernel_smooth(h, a) @ wᵀ`` ([S, n, c]; ``w`` [S, c, d]) reassociated as ``κ (h wᵀ) / κ 1``: the
    kernel is linear over rows, so it smooths the c-column projection instead of the d-column ``h``,
    and ``h wᵀ`` and the score's ``h · â`` are one product ``h [wᵀ | â]``. ``h``: [S, n, d], or the S
    models' [n, d] rows as a list (not copied into a stack)."""
    hs = list(h.unbind(0)) if isinstance(h, Tensor) else list(h)
    proj = torch.cat([w.transpose(-1, -2), F.normalize(a, dim=-1).unsqueeze(-1)], -1)  # [S, d, c + 1]
    both = torch.stack([x @ p for x, p in zip(hs, proj.unbind(0), strict=True)])
    s = _cosine(both[..., -1], torch.stack([torch.linalg.vector_norm(x, dim=-1) for x in hs]))
    return _smooth(s, both[..., :-1], sigma, order)


def rows_operator(P: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """``(P[rows], P[rows]ᵀ)`` as CSR for a sparse ``P`` [n, n] and a boolean row mask [n]: the propagation
    read at the rows the loss reads (the training nodes) only, and its transpose for the gradient."""
    sub = P.coalesce().index_select(0, rows.nonzero().flatten()).coalesce()  # the rows, renumbered 0..m-1
    return to_csr(sub), to_csr(sub.t().coalesce())


def _propagate(op: tuple[Tensor, Tensor], t: Tensor) -> Tensor:
    """``(P t_s)[rows]`` for every model s of a stack ``t`` [S, n, c] (``op`` from :func:`rows_operator`):
    one CSR product over [n, S·c], each output row ``P``'s own row sum — the values of ``(P t)[rows]``,
    and a gradient that skips the rows the loss never reads."""
    a, at = op
    n_s, n, c = t.shape
    return _SpMM.apply(a, at, t.transpose(0, 1).reshape(n, n_s * c)).view(-1, n_s, c).transpose(0, 1)


def _summed_ce(logits: Tensor, y: Tensor) -> Tensor:
    """Σ_s of each model's mean CE over its rows (``logits`` [S, m, C], ``y`` the S models' labels, [S·m]).

    The log-softmax runs over the class axis laid out as rows ([C, m]): on the CPU, ATen's kernel over a
    short last axis (C < 16) takes several times longer than over a leading one. One call per model: the
    kernel's last columns take its scalar path, so over the S models' columns at once a model's numbers
    would depend on how many models share the call (the trainer's chunks)."""
    m = logits.shape[1]
    total = torch.stack([-torch.log_softmax(z.t().contiguous(), 0).gather(0, t.unsqueeze(0)).sum()
                         for z, t in zip(logits.unbind(0), y.view(logits.shape[0], m).unbind(0), strict=True)])
    return total.sum() / max(m, 1)


@register
class FedAux(FederatedMethod):
    """FedAux-1R: auxiliary-projection similarity → personalized aggregation (one round)."""

    name = "fedaux1r"
    aliases = ("fedaux", "fedaux-1r")
    label = "FedAux-1R"
    colour, marker = "#4477AA", "p"
    paper_rows = {"pace_control": 7}  # its rows in the papers' tables
    paper = "Zhuo et al. 2025, Personalized subgraph federated learning with differentiable auxiliary projections"
    personalized = True
    shared_keys: tuple[str, ...] = ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", AUX_KEY)

    @dataclass(frozen=True)
    class Config:
        sigma: float = param(1.0, Interval(float, 0.5, None))
        norm_scale: float = param(10.0, Interval(float, 0, None))
        aux_weight: float = param(1.0, Interval(float, 0, None))
        head: str = param("concat", Options(HEADS))
        similarity: str = param("params", Options(SIMILARITIES))

    def validate(self) -> None:
        if self.cfg.head == "concat":
            self.shared_keys = type(self).shared_keys + (ZW_KEY,)

    def start_models(self, ctx, start):
        hidden = start["conv1.weight"].shape[1]
        aux, zw = [], []
        for seed in ctx.seeds:
            g = torch.Generator().manual_seed(int(seed) + 31337)
            aux.append(torch.randn(hidden, generator=g))
            bound = math.sqrt(6.0 / (hidden + ctx.fg.num_classes))  # glorot, as GCNConv
            zw.append((torch.rand(ctx.fg.num_classes, hidden, generator=g) * 2 - 1) * bound)
        out = {**start, AUX_KEY: torch.stack(aux).repeat_interleave(ctx.num_clients, dim=0)}
        if self.cfg.head == "concat":
            out[ZW_KEY] = torch.stack(zw).repeat_interleave(ctx.num_clients, dim=0)
        return out

    def plain_local(self, ctx) -> bool:
        return False

    def prepare(self, ctx: FedContext) -> None:
        ctx.state["rows_op"] = [rows_operator(propagation_matrix(c.edge_index, c.num_nodes), c.train_mask)
                                for c in ctx.fg.clients]

    def local_loss(self, step: TrainStep, ctx: FedContext) -> Tensor:
        total: Any = 0.0  # a tensor after the first client
        for k, pos in step.by_client():  # the S models of one client share its graph: stacked [S, n, ·]
            c = ctx.fg.clients[k]
            h = [step.hidden[i] for i in pos]
            dev = h[0].device
            aux = step.params[AUX_KEY][pos]
            rows_p, rows_pt = ctx.state["rows_op"][k]
            op = (rows_p.to(dev), rows_pt.to(dev))
            tm = c.train_mask.to(dev)
            y = c.y.to(dev)[tm].repeat(len(pos))
            if self.cfg.head == "concat":  # CE of P(h W_h + z W_z) + b replaces the trainer's CE of P(h W_h) + b
                logits = torch.stack([step.logits[i][tm] for i in pos])
                extra = _propagate(op, smoothed_projection(h, aux, step.params[ZW_KEY][pos], self.cfg.sigma))
                total = total + _summed_ce(logits + extra, y) - _summed_ce(logits, y)
            else:
                w2 = effective_weight({n: v[pos] for n, v in step.params.items()}, 2)
                out = _propagate(op, smoothed_projection(h, aux, w2, self.cfg.sigma)) + step.params["conv2.bias"][pos].unsqueeze(1)
                total = total + self.cfg.aux_weight * _summed_ce(out, y)
        return total

    @torch.no_grad()
    def eval_forward(self, params, client) -> Tensor:
        """Eval-mode logits of one deployed model on its client graph (``[h ‖ z]`` classifier)."""
        P = propagation_matrix(client.edge_index, client.num_nodes)
        z_plain, h = gcn_forward(params, client.x, P, return_hidden=True)
        if self.cfg.head != "concat":
            return z_plain
        zw = smoothed_projection(h.unsqueeze(0), params[AUX_KEY].unsqueeze(0), params[ZW_KEY].unsqueeze(0), self.cfg.sigma)
        return z_plain + torch.sparse.mm(P, zw[0])

    def aggregate(self, ctx, trained, stats):
        if self.cfg.similarity == "aux":
            emb = ctx.view(trained[AUX_KEY])
        else:
            emb = torch.cat([ctx.view(trained[k]).flatten(2) for k in self.shared_keys], dim=2)
        w = torch.stack([similarity_weights(emb[s], self.cfg.norm_scale) for s in range(ctx.num_seeds)])
        ctx.state["weights"] = w
        return self.with_private(ctx, mix(trained, w, ctx.num_seeds, ctx.num_clients, self.shared_keys), trained)

    def diagnostics(self, ctx) -> dict:
        """``similarity_diag[s][i]`` = S_ii, receiver i's weight on its own model."""
        return similarity_diagonal(ctx)
