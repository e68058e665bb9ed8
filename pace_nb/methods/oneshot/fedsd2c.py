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
3. **distillate synthesis** (``synthesis_stage``): a distillate is the *decoding of a latent code*
   ``z`` of an autoencoder — the released method encodes the Fourier-perturbed start with a
   pretrained image VAE (``vae+fourier``) and optimises its latent, so that every distillate stays
   on the image manifold. Every distillate is matched to *its own* core-set sample — MSE between
   the distiller's penultimate features of the distillate and of that sample, plus ``r_c`` ·
   cross-entropy of the distiller's prediction against the label — by AdamW on ``z`` (lr 0.1,
   betas (0.5, 0.9), cosine schedule) for ``steps`` = 100 steps (:func:`synthesize_distillates`);
   the decoded distillates are uploaded (as the release passes the decoded ``best_inputs``);
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
distillates; ``knn > 0`` joins them by a cosine kNN graph).

**The graph stand-in for the image VAE** (:func:`train_autoencoder`): no pretrained autoencoder
exists for node features, so each client trains a small feature autoencoder on *its own nodes'*
features (every node of its subgraph; no labels): ``F → ae_hidden → ae_latent → ae_hidden → F``,
Bernoulli cross-entropy with a sigmoid output on binary bag-of-words features (Cora, CiteSeer,
Computers, CS), squared error with the output clipped to the client's feature range otherwise,
``ae_epochs`` full-batch Adam steps at ``ae_lr`` (these four values are ours: 64-d codes, width 128,
300 steps at 5e-3 — the cheapest of the budgets tried whose decoder returns every probed row
nearest to itself, on a demo client and a Cora client; 200 steps at 1e-3 decode every row to
about the client's mean row, 2–16 % nearest to themselves). The distillate is
the decoder's output, so its support and scale are those the client's own rows have: optimising
raw features instead turned ~18-word binary rows into dense ones 3.5× their own norm away while
the matching loss reached 1e-4 (on Cora, data seed 2024: 37.4 % with raw-feature synthesis
against 58.9 % for the core-set alone; with the autoencoder, data seed 2024, full / core-set only /
no synthesis steps: Cora 70.3 / 58.9 / 75.6, CiteSeer 52.2 / 49.7 / 52.6, PubMed 50.3 / 78.3 / 77.6).
On PubMed's continuous TF-IDF rows the squared-error decoder is not sparse: its distillates carry
~285 non-zeros of 500 against ~42 for the core-set rows, and the matched codes end 3× the norm of
the client's encoded rows, off the region the autoencoder was fitted on. The autoencoder never
leaves the client.

The Fourier transform runs along the feature axis (a node's feature vector plays the image). No crops: one view per node (``num_crop = 1``).
The released ``ipc = 50`` is a tenth of TinyImageNet's 500 images per class; the clients of a
β = 0.05 Cora federation hold 3–162 training nodes per class, so ``ipc = 10``. The server trains
the global GCN with the shared full-batch routine (:meth:`OneShotContext.fit`) rather than the
released SGD schedule tuned for ResNets. ``init = "noise"`` (an ablation, not in the release)
starts the latent codes from Gaussian noise to show that the matching carries the information.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, Options, param
from pace_nb.methods.oneshot.base import OneShotMethod, SyntheticGraph, adam_steps, gcn_shapes, is_binary, knn_graph, mlp
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


class FeatureAutoencoder(torch.nn.Module):
    """The graph stand-in for the released image VAE: ``F → hidden → latent → hidden → F``.
    :meth:`decode` maps a code onto the client's feature space (sigmoid for binary features,
    clipped to ``[lo, hi]`` otherwise)."""

    def __init__(self, num_features: int, hidden: int, latent: int, binary: bool, lo: float, hi: float, seed: int):
        super().__init__()
        self.encoder = mlp([num_features, hidden, latent], seed)
        self.decoder = mlp([latent, hidden, num_features], seed + 1)
        self.binary, self.lo, self.hi = bool(binary), float(lo), float(hi)

    def encode(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    def decode(self, z: Tensor) -> Tensor:
        out = self.decoder(z)
        return torch.sigmoid(out) if self.binary else out.clamp(self.lo, self.hi)

    def loss(self, x: Tensor) -> Tensor:
        """Reconstruction loss per node: Bernoulli cross-entropy (binary) or squared error, summed over features."""
        out = self.decoder(self.encoder(x))
        if self.binary:
            return F.binary_cross_entropy_with_logits(out, x, reduction="none").sum(1).mean()
        return ((out - x) ** 2).sum(1).mean()


def train_autoencoder(x: Tensor, *, hidden: int, latent: int, epochs: int, lr: float, seed: int) -> FeatureAutoencoder:
    """A :class:`FeatureAutoencoder` fitted to the rows of ``x`` (a client's own nodes) by
    ``epochs`` full-batch Adam steps; binary when every entry of ``x`` is 0 or 1."""
    ae = FeatureAutoencoder(x.shape[1], hidden, latent, is_binary(x), float(x.min()), float(x.max()), seed)
    adam_steps(ae.parameters(), lambda: ae.loss(x), epochs, lr)
    return ae.requires_grad_(False)


def synthesize_distillates(theta: dict, decode, z0: Tensor, target: Tensor, y: Tensor, *, steps: int, lr: float,
                           r_c: float) -> tuple[Tensor, Tensor]:
    """Per-instance feature matching of isolated-node distillates ``x = decode(z)``
    (``synthesis_stage``): ``MSE(h(x), target) + r_c · CE(f(x), y)`` minimised over the latent
    codes ``z`` by AdamW (betas 0.5, 0.9) with the cosine schedule ``lr · ½(1 + cos(π t / steps))``.
    Returns (codes ``z``, distillates ``decode(z)``)."""
    z = z0.detach().clone().requires_grad_(True)
    if steps > 0 and z.shape[0] > 0:
        eye = propagation_matrix(_NO_EDGES, z.shape[0])
        opt = torch.optim.AdamW([z], lr=lr, betas=(0.5, 0.9), eps=1e-8)
        for t in range(int(steps)):
            for g in opt.param_groups:
                g["lr"] = 0.5 * (1 + math.cos(math.pi * t / steps)) * lr
            zl, h = gcn_forward(theta, decode(z), eye, return_hidden=True)
            loss = F.mse_loss(h, target) + r_c * F.cross_entropy(zl, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return z.detach(), decode(z).detach()


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

    quick_params = {"steps": 5, "ae_epochs": 20, "mipc": 50}  # fast on a small graph (conformance checks)

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
        ae_latent: int = param(64, Interval(int, 1, 1 << 14))
        ae_hidden: int = param(128, Interval(int, 1, 1 << 16))
        ae_epochs: int = param(300, Interval(int, 0, 100_000))
        ae_lr: float = param(5e-3, Interval(float, 0.0, 10.0, closed="right"))

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
        ae = train_autoencoder(x, hidden=cfg.ae_hidden, latent=cfg.ae_latent, epochs=cfg.ae_epochs, lr=cfg.ae_lr,
                               seed=int(ctx.generator(k, salt=3).initial_seed()) % (2**31))
        with torch.no_grad():
            if cfg.init == "fourier":
                z0 = ae.encode(fourier_mix(x[core], x[partner], cfg.fourier_lambda).clamp(float(x.min()), float(x.max())))
            elif cfg.init == "coreset":
                z0 = ae.encode(x[core])
            else:
                z0 = torch.randn(len(core), cfg.ae_latent, generator=gen)
        _, xs = synthesize_distillates(theta, ae.decode, z0, h[core], y[core], steps=cfg.steps, lr=cfg.lr, r_c=cfg.r_c)
        return {"x": xs, "y": y[core].float(), **model}

    def budget(self) -> str:
        c = self.cfg
        if c.mode == "coreset":
            return f"released -cis coreset: {c.ipc} nodes per class chosen by the distiller, no synthesis"
        return (f"released budget: {c.steps} latent synthesis steps per client; the graph stand-in for the image "
                f"VAE adds a {c.ae_epochs}-epoch feature autoencoder per client")

    def upload_shapes(self, num_features, num_classes, hidden=None):
        """Distillates (one per core-set node) with their labels and the distiller; a client with no
        class above ``ipc`` sends an empty set and no distiller."""
        n = "distillates"
        return ({"x": (n, num_features), "y": (n,), **gcn_shapes("model", num_features, num_classes, hidden)},
                {"x": (0, num_features), "y": (0,)})

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
