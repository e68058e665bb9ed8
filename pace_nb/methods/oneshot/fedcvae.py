"""FedCVAE (Heinbaugh, Luz-Ricca and Shao, ICLR 2023, "Data-free one-shot federated learning
under very high statistical heterogeneity"), the FedCVAE-Ens variant.

Kept: each client trains a conditional VAE (encoder q(z | x, y), decoder p(x | z, y), standard
normal prior, loss = reconstruction + β·KL, Kingma & Welling 2014) on its own labelled data and
uploads the **decoder** and its label counts once; the server draws z ~ N(0, I) and y from each
client's own label distribution, decodes synthetic samples with that client's decoder (the
"Ens" variant: one decoder per client, no decoder distillation) and trains the global
classifier on the pooled synthetic data.

Adapted to graphs: the CVAE models the raw node features x (the global GCN's input space) of
the client's training nodes; reconstruction is Bernoulli cross-entropy on binary bag-of-words
features (as the paper's image datasets) and squared error otherwise. The server's synthetic
nodes are joined by a symmetric cosine kNN graph over the decoded features (``knn`` neighbours)
so that the global model is a GCN trained with the shared server routine. The total number of
synthetic nodes (``synthetic_nodes``) is split over (client, class) in proportion to the counts.
Defaults: latent 16 / hidden 128 / Adam 1e-3 / β = 1 follow the authors' released defaults in
spirit (their MLP CVAE for MNIST uses a small latent and Adam 1e-3); 200 full-batch epochs.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, param
from pace_nb.methods.oneshot.base import (OneShotMethod, SyntheticGraph, adam_steps, allocate, is_binary, knn_graph,
                                          label_counts, load_module, mlp, module_message, module_shapes)
from pace_nb.methods.phases import PublicView
from pace_nb.methods.contract import register


def cvae_loss(x: Tensor, recon: Tensor, mu: Tensor, logvar: Tensor, beta: float = 1.0, binary: bool = True) -> Tensor:
    """Negative ELBO per node, averaged: ``Σ_f rec(x_f, x̂_f) + β · KL(N(μ, σ²) ‖ N(0, I))``.

    ``recon`` is a logit (Bernoulli BCE) when ``binary``, else the mean (squared error);
    ``KL = −½ Σ_j (1 + log σ_j² − μ_j² − σ_j²)``.
    """
    if binary:
        rec = F.binary_cross_entropy_with_logits(recon, x, reduction="none").sum(1)
    else:
        rec = ((recon - x) ** 2).sum(1)
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)
    return (rec + beta * kl).mean()


@register
class FedCVAE(OneShotMethod):
    """FedCVAE-Ens: per-client CVAE decoders + label counts → synthetic nodes at the server."""

    name = "fedcvae"
    label = "FedCVAE"
    colour, marker = "#E69F00", "H"
    paper_rows = {"oneshot": 1}  # its rows in the papers' tables
    quick_params = {"epochs": 5, "synthetic_nodes": 100}  # fast on a small graph (conformance checks)
    paper = "Heinbaugh et al. 2023, Data-free one-shot federated learning under very high statistical heterogeneity"

    @dataclass(frozen=True)
    class Config:
        latent: int = param(16, Interval(int, 1, 4096))
        hidden: int = param(128, Interval(int, 1, 16_384))
        epochs: int = param(200, Interval(int, 0, 100_000))
        lr: float = param(1e-3, Interval(float, 0.0, 10.0, closed="right"))
        beta_kl: float = param(1.0, Interval(float, 0.0, None))
        synthetic_nodes: int = param(1000, Interval(int, 1, 1_000_000))
        knn: int = param(5, Interval(int, 0, 1000))

    def decoder(self, ctx, seed: int):
        return mlp([self.cfg.latent + ctx.num_classes, self.cfg.hidden, ctx.num_features], seed)

    def client_message(self, ctx, k, client):
        c, cfg = ctx.num_classes, self.cfg
        x = client.x[client.train_mask].float()
        y1 = F.one_hot(client.y[client.train_mask].long(), c).float()
        binary = is_binary(x)
        seed = int(ctx.generator(k).initial_seed())
        enc = mlp([ctx.num_features + c, cfg.hidden, 2 * cfg.latent], seed)
        dec = self.decoder(ctx, seed + 1)
        gen = ctx.generator(k, salt=1)

        def loss():
            h = enc(torch.cat([x, y1], 1))
            mu, logvar = h[:, :cfg.latent], h[:, cfg.latent:].clamp(-10, 10)
            z = mu + torch.randn(mu.shape, generator=gen) * (0.5 * logvar).exp()
            return cvae_loss(x, dec(torch.cat([z, y1], 1)), mu, logvar, cfg.beta_kl, binary)

        adam_steps(list(enc.parameters()) + list(dec.parameters()), loss, cfg.epochs, cfg.lr)
        return {**module_message("decoder", dec), "counts": label_counts(client, c),
                "binary": torch.tensor([float(binary)])}

    def budget(self) -> str:
        c = self.cfg
        return f"{c.epochs} CVAE epochs per client; {c.synthetic_nodes} synthetic nodes in all at the server"

    def upload_shapes(self, num_features, num_classes, hidden=None):
        dec = self.decoder(PublicView(num_features, num_classes, 0), 0)
        return {**module_shapes("decoder", dec), "counts": (num_classes,), "binary": (1,)}

    def synthesize(self, ctx, messages):
        c, cfg = ctx.num_classes, self.cfg
        counts = torch.stack([m["counts"] for m in messages])          # [K', C]
        alloc = allocate(counts.reshape(-1), cfg.synthetic_nodes).reshape(counts.shape)
        gen = ctx.generator(-1, salt=2)
        xs, ys = [], []
        with torch.no_grad():
            for m, n_kc in zip(messages, alloc, strict=True):
                y = torch.repeat_interleave(torch.arange(c), n_kc)
                if y.numel() == 0:
                    continue
                dec = load_module("decoder", self.decoder(ctx, 0), m)
                out = dec(torch.cat([torch.randn(y.numel(), cfg.latent, generator=gen), F.one_hot(y, c).float()], 1))
                xs.append(torch.sigmoid(out) if float(m["binary"][0]) > 0.5 else out)
                ys.append(y)
        x, y = torch.cat(xs), torch.cat(ys)
        return SyntheticGraph(x, y, knn_graph(x, cfg.knn))
