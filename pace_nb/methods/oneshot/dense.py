"""DENSE (Zhang et al., NeurIPS 2022, "DENSE: Data-free one-shot federated learning"), as released
(``helpers/synthesizers.py`` ``AdvSynthesizer``, ``loop_df_fl.py``; the README's distillation run).

Kept: each client trains its model locally and uploads it once (here: its matched Local GCN, the
models every protocol method reuses). The server runs ``epochs`` epochs of

1. **data generation** (``AdvSynthesizer.synthesize``): the generator is **re-initialised**
   (``reset_model``: weights N(0, 0.02), biases 0, BN scales N(1, 0.02)); a fresh noise batch z
   (optimised together with the generator, Adam lr ``lr_g``, betas (0.5, 0.999)) and labels drawn
   **uniformly** over the classes; ``g_steps`` steps on
   ``oh · CE(ensemble(x), y) + bn · L_BN + adv · L_adv`` where the ensemble is the mean of the
   client models' logits, L_BN DeepInversion's statistics term summed over the teachers' BN
   layers (:func:`bn_loss`) and L_adv the boundary term ``−mean_i m_i · KL_i(t ‖ s)`` on the samples
   where student and ensemble **disagree** (``m_i = [argmax s_i ≠ argmax t_i]``,
   :func:`adversarial_loss`); the lowest-loss batch of the epoch joins a **data pool**;
2. **model distillation** (``kd_train``): one pass over the whole pool (every past epoch's
   batch, shuffled), the student matching the ensemble at temperature T = 20
   (:func:`kd_loss`), SGD lr 0.005, momentum 0.9, kept across epochs.

Adapted to graphs: a generated batch is a graph whose edges are the symmetric cosine kNN graph
(``knn`` neighbours) of its detached features, rebuilt at every generator step; teachers and
student are GCNs on it. A pool entry is such a graph (its features, edges and the ensemble's
logits — fixed, since graphs get no image augmentation), so a distillation step is one stored
graph, visited in shuffled order. L_BN: the released ``--bn 1.0`` weighs a sum over the
teachers' BatchNorm hooks, and the README's ``--model=cnn`` (``CNNCifar``) has no BN layer, so
that run's L_BN is zero; a GCN has none either, hence ``bn = 0``. ``bn > 0`` adds an emulated
term: each client then also uploads what a BN layer after its first convolution would track
(mean and variance of its layer-1 pre-activations on its own subgraph) — on our federations it
pulls every generated node to the same statistics and the ensemble to a single class (demo,
β = 1, 20 epochs: 58.6 % with ``bn = 0``, 22.8 % with ``bn = 0.1``). The generator is an MLP
``Linear → BN → LeakyReLU(0.2) → Linear`` with a sigmoid output on binary bag-of-words features (the released generator ends in a
sigmoid for images); after each reset its output bias is set to the clients' mean input (the
logit of the feature density on binary data), since the reset's output of 0.5 everywhere is
far from a sparse bag-of-words row. The client also uploads its mean input and label counts.

The teachers' ensemble itself is scored on the complete graph and recorded beside DENSE's row
(``params.teacher_ensemble_*``, :meth:`Dense.diagnostics`): DENSE distils that ensemble, so it
bounds what the student can reach.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, param
from pace_nb.methods import metrics
from pace_nb.methods.oneshot.base import OneShotMethod, gcn_shapes, is_binary, knn_graph, label_counts
from pace_nb.nn.gcn import WEIGHT_KEYS, drawn_, gcn_forward, propagation_matrix
from pace_nb.methods.contract import register


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
    """DENSE's ensemble (``Ensemble_A``): the mean of the client models' logits."""
    return teacher_forward(stack_teachers(teachers), x, P)[0].mean(0)


def teacher_ensemble_scores(T: dict[str, Tensor], fg, num_classes: int) -> dict[str, float]:
    """``teacher_ensemble_{acc,f1_weighted,f1_macro}`` (percent): the mean of the stacked teachers'
    logits ``T`` (:func:`stack_teachers`) scored on ``fg``'s complete graph (its global test mask)."""
    d, mask = fg.data, fg.global_mask("test")
    x = d.x.to_dense() if d.x.is_sparse else d.x
    with torch.no_grad():
        z = teacher_forward(T, x.float(), propagation_matrix(d.edge_index, int(d.num_nodes)))[0].mean(0)
    sc = metrics.scores(d.y.view(-1)[mask], z.argmax(1)[mask], num_classes)
    return {f"teacher_ensemble_{k}": 100 * v for k, v in sc.items()}


def bn_loss(pre: Tensor, mean: Tensor, var: Tensor) -> Tensor:
    """DeepInversion/DENSE statistics term summed over the teachers' hooks:
    ``Σ_k ‖σ²_k(gen) − σ²_k‖₂ + ‖μ_k(gen) − μ_k‖₂`` over layer-1 pre-activations ``pre [K, n, H]``
    against the uploaded ``mean, var [K, H]``."""
    return ((pre.mean(1) - mean).norm(dim=1) + (pre.var(1, unbiased=False) - var).norm(dim=1)).sum()


def kd_loss(teacher: Tensor, student: Tensor, temperature: float = 1.0) -> Tensor:
    """``T² · KL(softmax(t/T) ‖ softmax(s/T))`` averaged over nodes (``helpers/utils.py`` ``kldiv``)."""
    return F.kl_div(F.log_softmax(student / temperature, 1), F.softmax(teacher / temperature, 1),
                    reduction="batchmean") * temperature ** 2


def disagreement_mask(teacher: Tensor, student: Tensor) -> Tensor:
    """``m_i = [argmax s_i ≠ argmax t_i]`` as floats."""
    return (student.argmax(1) != teacher.argmax(1)).float()


def adversarial_loss(teacher: Tensor, student: Tensor) -> Tensor:
    """DENSE's boundary term ``−(1/n) Σ_i m_i · KL_i(t ‖ s)``, m = :func:`disagreement_mask`."""
    kl = (F.softmax(teacher, 1) * (F.log_softmax(teacher, 1) - F.log_softmax(student, 1))).sum(1)
    return -(kl * disagreement_mask(teacher, student)).mean()


def make_generator(nz: int, hidden: int, out: int) -> torch.nn.Sequential:
    """The generator MLP (``models/generator.py`` with linear layers)."""
    return torch.nn.Sequential(torch.nn.Linear(nz, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.LeakyReLU(0.2),
                               torch.nn.Linear(hidden, out))


@torch.no_grad()
def reset_generator(gen: torch.nn.Sequential, out_bias: Tensor, rng: torch.Generator) -> None:
    """``reset_model``: linear weights N(0, 0.02), biases 0, BN scale N(1, 0.02), shift 0; then the
    output bias is set to ``out_bias`` (graph adaptation, module docstring). The draws come from the
    CPU generator ``rng`` on any device of ``gen``."""
    for m in gen.modules():
        if isinstance(m, torch.nn.Linear):
            drawn_(m.weight, "normal_", 0.0, 0.02, generator=rng)
            m.bias.zero_()
        elif isinstance(m, torch.nn.BatchNorm1d):
            drawn_(m.weight, "normal_", 1.0, 0.02, generator=rng)
            m.bias.zero_()
            m.reset_running_stats()
    last = gen[-1]
    assert isinstance(last, torch.nn.Linear), "the generator ends in a Linear layer"
    last.bias.copy_(out_bias)


@dataclass
class PoolEntry:
    """One generated graph of the data pool: features, propagation matrix, ensemble logits."""

    x: Tensor
    P: Tensor
    t: Tensor


@register
class Dense(OneShotMethod):
    """DENSE: ensemble of uploaded GCNs → re-initialised adversarial generator + pooled KD of the global GCN."""

    name = "dense"
    label = "DENSE"
    colour, marker = "#CC79A7", "8"
    paper_rows = {"oneshot": 0}  # its rows in the papers' tables
    quick_params = {"epochs": 5, "g_steps": 2, "synthesis_batch_size": 32}  # fast on a small graph (conformance checks)
    paper = "Zhang et al. 2022, DENSE: Data-free one-shot federated learning"
    uses_local = True

    @dataclass(frozen=True)
    class Config:
        epochs: int = param(200, Interval(int, 0, 100_000))
        g_steps: int = param(30, Interval(int, 1, 10_000))
        synthesis_batch_size: int = param(256, Interval(int, 2, 1_000_000))
        nz: int = param(256, Interval(int, 1, 4096))
        gen_hidden: int = param(128, Interval(int, 1, 16_384))
        lr_g: float = param(1e-3, Interval(float, 0.0, 10.0, closed="right"))
        lr: float = param(0.005, Interval(float, 0.0, 10.0, closed="right"))
        momentum: float = param(0.9, Interval(float, 0.0, 1.0, closed="left"))
        adv: float = param(1.0, Interval(float, 0.0, None))
        bn: float = param(0.0, Interval(float, 0.0, None))
        oh: float = param(1.0, Interval(float, 0.0, None))
        T: float = param(20.0, Interval(float, 0.0, None, closed="neither"))
        knn: int = param(5, Interval(int, 0, 1000))

    def client_message(self, ctx, k, client):
        model = {n: ctx.local[k][n] for n in WEIGHT_KEYS}
        bn = {}
        if self.cfg.bn > 0:  # the running statistics a BN layer after conv1 would hold
            with torch.no_grad():
                _, pre = teacher_forward(stack_teachers([model]), client.x.float(),
                                         propagation_matrix(client.edge_index, client.num_nodes))
            bn = {"bn.mean": pre[0].mean(0), "bn.var": pre[0].var(0, unbiased=False)}
        return {**{f"model.{n}": v for n, v in model.items()}, "counts": label_counts(client, ctx.num_classes),
                **bn, "x.mean": client.x.float().mean(0), "binary": torch.tensor([float(is_binary(client.x))])}

    def budget(self) -> str:
        c = self.cfg
        return (f"released budget: {c.epochs} epochs x {c.g_steps} generator steps of {c.synthesis_batch_size} "
                "nodes, each scored by every client's model")

    def upload_shapes(self, num_features, num_classes, hidden=None):
        h = "hidden" if hidden is None else hidden
        bn = {"bn.mean": (h,), "bn.var": (h,)} if self.cfg.bn > 0 else {}
        return {**gcn_shapes("model", num_features, num_classes, hidden), "counts": (num_classes,), **bn,
                "x.mean": (num_features,), "binary": (1,)}

    def synthesize(self, ctx, messages):
        return None  # DENSE trains its student while generating (server_train)

    def generate(self, ctx, T, stats, gen, out_bias, binary, student, epoch) -> PoolEntry:
        """One epoch of ``AdvSynthesizer.synthesize``: the lowest-loss batch of ``g_steps`` steps (on
        ``ctx.device``; noise and labels drawn on the CPU, so every device starts from the same batch)."""
        cfg, c, n, dev = self.cfg, ctx.num_classes, self.cfg.synthesis_batch_size, ctx.device
        rng = ctx.generator(-1, salt=1000 + epoch)
        reset_generator(gen, out_bias, rng)
        z = torch.randn(n, cfg.nz, generator=rng).to(dev).requires_grad_(True)
        y = torch.randint(0, c, (n,), generator=rng).sort()[0].to(dev)
        opt = torch.optim.Adam([{"params": list(gen.parameters())}, {"params": [z]}], cfg.lr_g, betas=(0.5, 0.999))
        fixed = {k: v.detach() for k, v in student.items()}
        best, best_cost = None, float("inf")
        for _ in range(cfg.g_steps):
            out = gen(z)
            x = torch.sigmoid(out) if binary else out
            P = propagation_matrix(knn_graph(x.detach(), cfg.knn), n)
            zk, pre = teacher_forward(T, x, P)
            t, s = zk.mean(0), gcn_forward(fixed, x, P)
            loss = cfg.oh * F.cross_entropy(t, y) + cfg.adv * adversarial_loss(t, s)
            if stats is not None:
                loss = loss + cfg.bn * bn_loss(pre, *stats)
            if best is None or loss.item() < best_cost:
                best, best_cost = PoolEntry(x.detach(), P, t.detach()), loss.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert best is not None, "g_steps >= 1 (a Config constraint)"
        return best

    def server_train(self, ctx, messages, graph):
        """The generator and student loops on ``ctx.device`` (``cuda`` when present); the global model
        comes back on the CPU."""
        cfg, dev = self.cfg, ctx.device
        T = stack_teachers([{n: m[f"model.{n}"] for n in WEIGHT_KEYS} for m in messages])
        ctx.state["dense_teachers"] = T
        T = {n: v.to(dev) for n, v in T.items()}
        stats = ((torch.stack([m["bn.mean"] for m in messages]).to(dev), torch.stack([m["bn.var"] for m in messages]).to(dev))
                 if cfg.bn > 0 else None)
        sizes = torch.stack([m["counts"].sum() for m in messages])
        x_mean = (torch.stack([m["x.mean"] for m in messages]) * sizes[:, None]).sum(0) / sizes.sum()
        binary = all(float(m["binary"][0]) > 0.5 for m in messages)
        out_bias = (torch.logit(x_mean.clamp(1e-4, 1 - 1e-4)) if binary else x_mean).to(dev)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the shapes only: every value is drawn by reset_generator
            gen = make_generator(cfg.nz, cfg.gen_hidden, ctx.num_features).to(dev)
        student = {k: v.to(dev).clone().requires_grad_(True) for k, v in ctx.init_model().items()}
        opt_s = torch.optim.SGD(student.values(), lr=cfg.lr, momentum=cfg.momentum)
        rng = ctx.generator(-1, salt=3)
        pool: list[PoolEntry] = []
        ctx.state["dense_pool_sizes"] = sizes_seen = []
        for epoch in range(cfg.epochs):
            gen.train()
            pool.append(self.generate(ctx, T, stats, gen, out_bias, binary, student, epoch))
            sizes_seen.append(len(pool))
            for i in torch.randperm(len(pool), generator=rng).tolist():
                e = pool[i]
                opt_s.zero_grad()
                kd_loss(e.t, gcn_forward(student, e.x, e.P), cfg.T).backward()
                opt_s.step()
        return {k: v.detach().cpu() for k, v in student.items()}

    def diagnostics(self, ctx, fg) -> dict:
        """The teachers' ensemble on the complete graph (what DENSE distils), in percent."""
        T = ctx.state.get("dense_teachers")
        return {} if T is None else teacher_ensemble_scores(T, fg, ctx.num_classes)
