"""FedSD2C (Zhang, Liu and Wang, NeurIPS 2024, "One-shot federated learning via synthetic
distiller-distillate communication"), as released (``fedsd2c/client.py``, ``fedsd2c/server.py``,
``fedsd2c/util.py``; ``configs/tinyimagenet/fedsd2c.yaml``).

Kept — each client, with its locally trained model (the *distiller*; here its matched Local GCN):

1. **core-set** (``coreset_stage`` / ``selector_coreset``): only classes with more than ``ipc``
   training samples take part (``CategoryDataset``; ``get_specified_labels``); of at most
   ``mipc`` shuffled candidates per class, the ``ipc`` with the lowest cross-entropy under the
   distiller (within a class the same order as the paper's V-information
   ``log p_θ(y|x) − log p(y)``, :func:`v_information`);
2. **Fourier-perturbed initialisation** (``_build_synset`` / ``colorful_spectrum_mix``,
   ``inputs_init = vae+fourier``, λ = ``fourier_lambda``): each core-set sample is paired at random
   with one of its class's hardest correctly-predicted non-core-set samples; the distillate
   starts from the core-set sample's phase with the amplitude ``(1 − λ)|X₁| + λ|X₂|``, clipped to
   the data range (:func:`fourier_mix`);
3. **distillate synthesis** (``synthesis_stage``): every distillate is matched to *its own*
   core-set sample — MSE between the distiller's penultimate features of the distillate and of
   that sample, plus ``r_c`` · cross-entropy of the distiller's prediction against the label —
   with AdamW (lr 0.1, betas (0.5, 0.9), cosine schedule) for ``steps`` = 100 steps
   (:func:`synthesize_distillates`);
4. **upload** (the title's distiller + distillates): the distillates, their labels and the
   distiller's weights. ``mode = "coreset"`` is the released ``-cis coreset`` variant: the
   core-set itself is uploaded, no synthesis.

Server (``train_distill``): the global model is trained on the union of the distillates by
knowledge distillation, each distillate's soft label coming from *its uploading client's*
distiller only (KL at T = 1, :func:`kd_targets`).

Adapted to graphs: a sample is a node. The distiller's features of a real core-set node are its
layer-1 GCN output on the client's own subgraph (neighbourhood-aware); a distillate is an
isolated node (self loop only), so it must carry its neighbourhood's information in its own
features, and it is scored at the server the same way (``knn = 0``: no edges among the
distillates; ``knn > 0`` joins them by a cosine kNN graph). Features are optimised directly (no
image VAE exists for node features) and projected back to the client's feature range after
every step — the released code's ``clip``. The Fourier transform runs along the feature axis
(a node's feature vector plays the image). No crops: one view per node (``num_crop = 1``).
The released ``ipc = 50`` is a tenth of TinyImageNet's 500 images per class; the clients of a
β = 0.05 Cora federation hold 3–162 training nodes per class, so ``ipc = 10``. The server trains
the global GCN with the shared full-batch routine (:meth:`OneShotContext.fit`) rather than the
released SGD schedule tuned for ResNets. ``init = "noise"`` (an ablation, not in the release)
starts the distillates from Gaussian noise to show that the matching carries the information.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.oneshot.base import OneShotMethod, SyntheticGraph, knn_graph
from pace_nb.methods.oneshot.dense import kd_loss
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix
from pace_nb.methods.contract import register

_NO_EDGES = torch.empty(2, 0, dtype=torch.long)


def v_information(logits: Tensor, y: Tensor, prior: Tensor) -> Tensor:
    """Pointwise V-information of each sample: ``log p_θ(y_i | x_i) − log p(y_i)``."""
    return F.log_softmax(logits, 1).gather(1, y.view(-1, 1)).squeeze(1) - prior.clamp_min(1e-12).log()[y]


def fourier_mix(x1: Tensor, x2: Tensor, lam: float) -> Tensor:
    """``colorful_spectrum_mix`` along the last axis: ``IFFT(((1 − λ)|X₁| + λ|X₂|) · e^{i∠X₁})`` (real part)."""
    f1, f2 = torch.fft.fft(x1.double(), dim=-1), torch.fft.fft(x2.double(), dim=-1)
    amp = (1.0 - lam) * f1.abs() + lam * f2.abs()
    return torch.fft.ifft(torch.polar(amp, f1.angle()), dim=-1).real.to(x1.dtype)


def select_coreset(ce: Tensor, y: Tensor, candidates: Tensor, ipc: int, mipc: int, pred: Tensor,
                   gen: torch.Generator) -> list[tuple[Tensor, Tensor]]:
    """Per class with more than ``ipc`` candidates: (``ipc`` core-set indices with the lowest CE,
    ``ipc`` partner indices — the hardest correctly predicted non-core-set samples, cycled; all
    non-core-set samples when none is predicted correctly) — ``selector_coreset`` / ``_build_synset``."""
    out = []
    for c in torch.unique(y[candidates]).tolist():
        idx = candidates[y[candidates] == c]
        if len(idx) <= ipc:
            continue
        idx = idx[torch.randperm(len(idx), generator=gen)][:mipc]
        order = torch.argsort(ce[idx], stable=True)
        core, rest = idx[order[:ipc]], idx[order[ipc:]]
        right = rest[pred[rest] == c]
        rest = right if len(right) else rest
        rest = rest[torch.argsort(ce[rest], descending=True, stable=True)]
        partner = rest.repeat(ipc // len(rest) + 1)[:ipc]
        out.append((core[torch.randperm(ipc, generator=gen)], partner))
    return out


def synthesize_distillates(theta: dict, x0: Tensor, target: Tensor, y: Tensor, *, steps: int, lr: float,
                           r_c: float, lo: float, hi: float) -> Tensor:
    """Per-instance feature matching of isolated-node distillates (``synthesis_stage``):
    ``MSE(h(x), target) + r_c · CE(f(x), y)``, AdamW (betas 0.5, 0.9) with the cosine schedule
    ``lr · ½(1 + cos(π t / steps))``, each step projected to ``[lo, hi]``."""
    x = x0.detach().clone().clamp(lo, hi).requires_grad_(True)
    if steps <= 0 or x.shape[0] == 0:
        return x.detach()
    eye = propagation_matrix(_NO_EDGES, x.shape[0])
    opt = torch.optim.AdamW([x], lr=lr, betas=(0.5, 0.9), eps=1e-8)
    for t in range(int(steps)):
        for g in opt.param_groups:
            g["lr"] = 0.5 * (1 + math.cos(math.pi * t / steps)) * lr
        z, h = gcn_forward(theta, x, eye, return_hidden=True)
        loss = F.mse_loss(h, target) + r_c * F.cross_entropy(z, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(lo, hi)
    return x.detach()


def kd_targets(messages: list[dict], edge_index: Tensor) -> Tensor:
    """Each distillate's soft label from its own uploader's distiller (logits [n, C]) on the server graph."""
    x = torch.cat([m["x"] for m in messages])
    P = propagation_matrix(edge_index, x.shape[0])
    out, o = [], 0
    with torch.no_grad():
        for m in messages:
            n = m["x"].shape[0]
            out.append(gcn_forward({k: m[f"model.{k}"] for k in WEIGHT_KEYS}, x, P)[o:o + n])
            o += n
    return torch.cat(out)


@register
class FedSD2C(OneShotMethod):
    """FedSD2C: core-set → Fourier-initialised, per-instance matched distillates + distiller → KD at the server."""

    name = "fedsd2c"
    label = "FedSD2C"
    colour, marker = "#009E73", "<"
    paper_rows = {"oneshot": 2}  # its rows in the papers' tables
    paper = "Zhang et al. 2024, One-shot federated learning via synthetic distiller-distillate communication"
    uses_local = True

    @dataclass(frozen=True)
    class Config:
        mode: str = param("full", Options(("full", "coreset")))
        ipc: int = param(10, Interval(int, 1, 100_000))
        mipc: int = param(500, Interval(int, 1, 10_000_000))
        steps: int = param(100, Interval(int, 0, 100_000))
        lr: float = param(0.1, Interval(float, 0.0, 10.0, closed="right"))
        r_c: float = param(0.01, Interval(float, 0.0, None))
        fourier_lambda: float = param(0.8, Interval(float, 0.0, 1.0))
        init: str = param("fourier", Options(("fourier", "coreset", "noise")))
        knn: int = param(0, Interval(int, 0, 1000))

    @property
    def variant(self) -> str:
        """Rows of the core-set-only variant are variant "coreset" (beside the full method's "native")."""
        return "coreset" if self.cfg.mode == "coreset" else "native"

    def client_message(self, ctx, k, client):
        cfg = self.cfg
        theta = {n: ctx.local[k][n].detach() for n in WEIGHT_KEYS}
        x, y = client.x.float(), client.y.long()
        tr = torch.nonzero(client.train_mask).flatten()
        gen = ctx.generator(k)
        with torch.no_grad():
            z, h = gcn_forward(theta, x, propagation_matrix(client.edge_index, client.num_nodes), return_hidden=True)
        ce = F.cross_entropy(z, y, reduction="none")
        blocks = select_coreset(ce, y, tr, cfg.ipc, cfg.mipc, z.argmax(1), gen)
        model = {f"model.{n}": v for n, v in theta.items()}
        if not blocks:  # no class above ipc: nothing to distil, nothing sent but an empty set
            return {"x": x.new_zeros(0, x.shape[1]), "y": y.new_zeros(0).float()}
        core = torch.cat([b[0] for b in blocks])
        partner = torch.cat([b[1] for b in blocks])
        if cfg.mode == "coreset":
            return {"x": x[core], "y": y[core].float(), **model}
        lo, hi = float(x.min()), float(x.max())
        if cfg.init == "fourier":
            x0 = fourier_mix(x[core], x[partner], cfg.fourier_lambda)
        elif cfg.init == "coreset":
            x0 = x[core]
        else:
            x0 = x.mean() + x.std() * torch.randn(len(core), x.shape[1], generator=gen)
        xs = synthesize_distillates(theta, x0, h[core], y[core], steps=cfg.steps, lr=cfg.lr, r_c=cfg.r_c, lo=lo, hi=hi)
        return {"x": xs, "y": y[core].float(), **model}

    def synthesize(self, ctx, messages):
        used = [m for m in messages if m["x"].shape[0] > 0]
        if not used:
            return SyntheticGraph(torch.zeros(0, ctx.num_features), torch.zeros(0, dtype=torch.long), _NO_EDGES)
        x = torch.cat([m["x"] for m in used])
        y = torch.cat([m["y"] for m in used]).round().long()
        ctx.state["fedsd2c_used"] = used
        return SyntheticGraph(x, y, knn_graph(x, self.cfg.knn) if self.cfg.knn > 0 else _NO_EDGES)

    def server_train(self, ctx, messages, graph):
        if graph.x.shape[0] == 0:
            return ctx.init_model()
        target = kd_targets(ctx.state["fedsd2c_used"], graph.edge_index)
        return ctx.fit(graph, loss_fn=lambda z, _th: kd_loss(target, z, 1.0))
