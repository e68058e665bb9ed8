"""DENSE (Zhang et al., NeurIPS 2022, "DENSE: Data-free one-shot federated learning").

Kept: each client trains its model locally and uploads it once (here: its matched Local GCN,
100 epochs of cross-entropy, shared W0 — the same models every protocol method reuses) plus
its label counts. The server alternates (i) **data generation**: a conditional generator
G(z, y) is trained so that the *ensemble* of the uploaded models (mean logits) classifies
its samples as y (cross-entropy) while an **adversarial boundary** term pushes samples to
where the student disagrees with the ensemble (−KL(ensemble ‖ student) on the samples where
both agree, the paper's L_adv); and (ii) **model distillation**: the global student is
trained to match the ensemble's softened outputs (KL at temperature ``temperature``) on
freshly generated samples.

Adapted to graphs: a generated batch of ``batch_nodes`` nodes is a graph whose edges are the
symmetric cosine kNN graph (``knn`` neighbours) over the generated features, rebuilt from the
(detached) features at every step; the teachers and the student are GCNs on that graph.
The BatchNorm-statistics term L_BN (DeepInversion): a GCN has no BN layer, so each client
uploads what a BN layer after its first convolution would track — the mean and variance of
its layer-1 pre-activations over its own subgraph — and the generator matches them through
every teacher (:func:`bn_loss`). Labels y are drawn from the pooled client
counts. Binary bag-of-words datasets get a sigmoid output layer (features in [0, 1]).
Defaults: λ_adv = λ_BN = 1, T = 20 and several generator steps per round as in the authors'
released code (as we read it); the generator is a 2-layer MLP (no BN) whose Adam rate is 1e-2
(1e-3 left it unable to fit the ensemble's labels within the budget) and whose output bias
starts at the clients' mean input; 30 rounds of 20 generator + 10 student steps (CPU budget).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval
from pace_nb.methods.oneshot.base import (OneShotMethod, is_binary, knn_graph, label_counts, mlp,
                                          oneshot_method)
from pace_nb.nn.gcn import WEIGHT_KEYS, gcn_forward, propagation_matrix


def stack_teachers(teachers: list[dict]) -> dict[str, Tensor]:
    """The K teachers' weights side by side (one product per layer for the whole ensemble)."""
    return {n: torch.stack([t[n] for t in teachers]) for n in WEIGHT_KEYS}


def teacher_forward(T: dict[str, Tensor], x: Tensor, P: Tensor) -> tuple[Tensor, Tensor]:
    """Every teacher on one graph: (logits [K, n, C], layer-1 pre-activations [K, n, H])."""
    k, h = T["conv1.weight"].shape[:2]
    pre = torch.sparse.mm(P, x @ T["conv1.weight"].reshape(k * h, -1).T).reshape(-1, k, h).transpose(0, 1)
    pre = pre + T["conv1.bias"].unsqueeze(1)
    z = torch.einsum("knh,kch->knc", F.relu(pre), T["conv2.weight"])
    z = torch.stack([torch.sparse.mm(P, zk) for zk in z]) + T["conv2.bias"].unsqueeze(1)
    return z, pre


def ensemble_logits(teachers: list[dict], x: Tensor, P: Tensor) -> Tensor:
    """DENSE's ensemble: the mean of the client models' logits."""
    return teacher_forward(stack_teachers(teachers), x, P)[0].mean(0)


def bn_loss(pre: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """DeepInversion/DENSE feature-statistics term: ``mean_k ‖μ_k(gen) − μ_k‖₂ + ‖σ²_k(gen) − σ²_k‖₂``
    over the teachers' layer-1 pre-activations ``pre [K, n, H]`` against their uploaded ``mean, var [K, H]``."""
    return ((pre.mean(1) - mean).norm(dim=1) + (pre.var(1, unbiased=False) - var).norm(dim=1)).mean()


def kd_loss(teacher: Tensor, student: Tensor, temperature: float = 1.0) -> Tensor:
    """``T² · KL(softmax(t/T) ‖ softmax(s/T))`` averaged over nodes (Hinton et al.'s distillation loss)."""
    return F.kl_div(F.log_softmax(student / temperature, 1), F.softmax(teacher / temperature, 1),
                    reduction="batchmean") * temperature ** 2


def adversarial_loss(teacher: Tensor, student: Tensor) -> Tensor:
    """DENSE's boundary term: ``−mean_i m_i · KL_i(t ‖ s)``, ``m_i = [argmax t_i = argmax s_i]``."""
    mask = (teacher.argmax(1) == student.argmax(1)).float()
    kl = (F.softmax(teacher, 1) * (F.log_softmax(teacher, 1) - F.log_softmax(student, 1))).sum(1)
    return -(mask * kl).sum() / mask.sum().clamp_min(1.0)


@oneshot_method
class Dense(OneShotMethod):
    """DENSE: ensemble of uploaded GCNs → data-free generator + distilled global GCN."""

    name = "dense"
    label = "DENSE"
    groups = {"oneshot": 0}  # row positions in the papers' tables
    paper = "Zhang et al. 2022, DENSE: Data-free one-shot federated learning"
    uses_local = True
    _parameter_constraints = {
        "rounds": [Interval(int, 0, 100_000)], "gen_steps": [Interval(int, 0, 1000)],
        "student_steps": [Interval(int, 0, 1000)], "batch_nodes": [Interval(int, 2, 1_000_000)],
        "noise_dim": [Interval(int, 1, 4096)], "gen_hidden": [Interval(int, 1, 1 << 14)],
        "gen_lr": [Interval(float, 0.0, 10.0, closed="right")], "student_lr": [Interval(float, 0.0, 10.0, closed="right")],
        "lambda_adv": [Interval(float, 0.0, None)], "lambda_bn": [Interval(float, 0.0, None)], "temperature": [Interval(float, 0.0, None, closed="neither")],
        "knn": [Interval(int, 0, 1000)],
    }

    @dataclass(frozen=True)
    class Config:
        rounds: int = 30
        gen_steps: int = 20
        student_steps: int = 10
        batch_nodes: int = 256
        noise_dim: int = 64
        gen_hidden: int = 256
        gen_lr: float = 1e-2
        student_lr: float = 0.01
        lambda_adv: float = 1.0
        lambda_bn: float = 1.0
        temperature: float = 20.0
        knn: int = 5

    def client_message(self, ctx, k, client):
        model = {n: ctx.local[k][n] for n in WEIGHT_KEYS}
        with torch.no_grad():  # the running statistics a BN layer after conv1 would hold
            _, pre = teacher_forward(stack_teachers([model]), client.x.float(),
                                     propagation_matrix(client.edge_index, client.num_nodes))
        return {**{f"model.{n}": v for n, v in model.items()}, "counts": label_counts(client, ctx.num_classes),
                "bn.mean": pre[0].mean(0), "bn.var": pre[0].var(0, unbiased=False), "x.mean": client.x.float().mean(0),
                "binary": torch.tensor([float(is_binary(client.x))])}

    def synthesize(self, ctx, messages):
        return None  # DENSE trains its student while generating (server_train)

    def server_train(self, ctx, messages, graph):
        cfg, c = self.cfg, ctx.num_classes
        T = stack_teachers([{n: m[f"model.{n}"] for n in WEIGHT_KEYS} for m in messages])
        bn_mean, bn_var = torch.stack([m["bn.mean"] for m in messages]), torch.stack([m["bn.var"] for m in messages])
        prior = torch.stack([m["counts"] for m in messages]).sum(0)
        binary = all(float(m["binary"][0]) > 0.5 for m in messages)
        gen = mlp([cfg.noise_dim + c, cfg.gen_hidden, ctx.num_features], int(ctx.generator(-1).initial_seed()))
        student = {k: v.clone().requires_grad_(True) for k, v in ctx.init_model().items()}
        x_mean = (torch.stack([m["x.mean"] for m in messages]) * torch.stack([m["counts"].sum() for m in messages])[:, None]
                  ).sum(0) / prior.sum()
        with torch.no_grad():  # start at the clients' mean input (logit of the density for binary features)
            gen[-1].bias.copy_(torch.logit(x_mean.clamp(1e-4, 1 - 1e-4)) if binary else x_mean)
        opt_g = torch.optim.Adam(gen.parameters(), lr=cfg.gen_lr)
        opt_s = torch.optim.Adam(student.values(), lr=cfg.student_lr)
        rng = ctx.generator(-1, salt=3)

        def sample():
            y = torch.multinomial(prior, cfg.batch_nodes, replacement=True, generator=rng)
            out = gen(torch.cat([torch.randn(cfg.batch_nodes, cfg.noise_dim, generator=rng), F.one_hot(y, c).float()], 1))
            x = torch.sigmoid(out) if binary else out
            return x, y, propagation_matrix(knn_graph(x.detach(), cfg.knn), cfg.batch_nodes)

        for _ in range(cfg.rounds):
            for _ in range(cfg.gen_steps):
                x, y, P = sample()
                zk, pre = teacher_forward(T, x, P)
                t, s = zk.mean(0), gcn_forward(student, x, P)
                loss = (F.cross_entropy(t, y) + cfg.lambda_adv * adversarial_loss(t, s)
                        + cfg.lambda_bn * bn_loss(pre, bn_mean, bn_var))
                opt_g.zero_grad()
                loss.backward()
                opt_g.step()
            for _ in range(cfg.student_steps):
                with torch.no_grad():
                    x, y, P = sample()
                    t = teacher_forward(T, x, P)[0].mean(0)
                opt_s.zero_grad()
                kd_loss(t, gcn_forward(student, x, P), cfg.temperature).backward()
                opt_s.step()
        return {k: v.detach() for k, v in student.items()}
