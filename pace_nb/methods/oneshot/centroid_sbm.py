"""Centroid-SBM (an extra one-shot baseline, not one of SPEAR's): class-wise k-means
codebooks of training-free node features → a stochastic-block-model synthetic graph.

Origin: this was the package's first reading of OASIS from SPEAR §2's one-line summary. It
trains no model at the client and is not the published OASIS (Wan et al. 2025, whose clients
train a GNN teacher, a graph synthesizer and a codebook; see :mod:`.oasis`), so it is
registered under its own name and in no paper group (not in SPEAR's comparison list).

Mechanism: each client quantizes its nodes' representations into a small **codebook**
(vector quantization, van den Oord et al. 2017) and uploads it once — codewords, the class of
each codeword, how many training nodes it holds, and the **code-to-code edge statistics** of
its subgraph (how many edges join nodes of code i to nodes of code j). The server generates a
synthetic graph from the union of the codebooks (nodes drawn per codeword, edges drawn
block-wise from the code-to-code edge rates: a stochastic block model) and trains the global
GNN on it.

Details: the node representation is ``[x ‖ P²x]`` — raw features beside their 2-step GCN
propagation (training-free); codewords are learnt per class over the training nodes by Lloyd
iterations (k-means) from a class-agnostic random start, ``codes_per_class`` codes per held
class; every node of the subgraph (labelled or not) is assigned to its nearest codeword
(cosine) to count edges. Only the raw half of each codeword travels (the global model's input
space): the upload contains class centroids of raw features. Generated node features are the
codeword plus Gaussian noise of the codeword's within-code standard deviation.
``iterations = 0`` leaves the codebook at its random start (never trained).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from pace_nb.core.validation import Interval, param
from pace_nb.methods.oneshot.base import (OneShotMethod, SyntheticGraph, allocate, label_counts,
                                          propagate_features)
from pace_nb.methods.contract import register


def lloyd(z: Tensor, init: Tensor, iterations: int) -> tuple[Tensor, Tensor]:
    """k-means (cosine assignment, mean update) from ``init``; empty codes keep their codeword.
    Returns (codewords [M, d], assignment [n])."""
    codes = init.clone()
    for _ in range(int(iterations)):
        assign = (F.normalize(z, dim=1) @ F.normalize(codes, dim=1).T).argmax(1)
        for m in range(len(codes)):
            if bool((assign == m).any()):
                codes[m] = z[assign == m].mean(0)
    return codes, (F.normalize(z, dim=1) @ F.normalize(codes, dim=1).T).argmax(1)


def code_edges(assign: Tensor, edge_index: Tensor, num_codes: int) -> Tensor:
    """``E[i, j]`` = number of directed edges from a node of code i to a node of code j."""
    E = torch.zeros(num_codes * num_codes)
    E.index_add_(0, assign[edge_index[0]] * num_codes + assign[edge_index[1]], torch.ones(edge_index.shape[1]))
    return E.view(num_codes, num_codes)


def block_edges(sizes: Tensor, rates: Tensor, generator: torch.Generator) -> Tensor:
    """Stochastic block model: an edge between nodes of blocks i, j with probability ``rates[i, j]``
    (symmetrized, no self loops) → edge_index [2, e]."""
    block = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    prob = rates.clamp(0, 1)[block][:, block]
    upper = torch.triu(torch.rand(prob.shape, generator=generator) < prob, diagonal=1)
    src, dst = torch.nonzero(upper, as_tuple=True)
    return torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1)


@register
class CentroidSBM(OneShotMethod):
    """Centroid-SBM: class-wise k-means codebooks → SBM synthetic graph at the server (extra)."""

    name = "centroid_sbm"
    label = "Centroid-SBM (extra)"
    colour, marker = "#44AA99", "1"
    paper = "an extra baseline: class-wise feature centroids + code-to-code edge counts → SBM graph"

    @dataclass(frozen=True)
    class Config:
        codes_per_class: int = param(8, Interval(int, 1, 10_000))
        iterations: int = param(20, Interval(int, 0, 10_000))
        steps: int = param(2, Interval(int, 0, 16))
        synthetic_nodes: int = param(1000, Interval(int, 1, 100_000))
        noise: float = param(1.0, Interval(float, 0.0, None))

    def client_message(self, ctx, k, client):
        cfg, c = self.cfg, ctx.num_classes
        x = client.x.float()
        z = torch.cat([x, propagate_features(x, client.edge_index, cfg.steps)], 1)
        tr = client.train_mask
        y = client.y.long()
        gen = ctx.generator(k)
        mu, sd = z.mean(), z.std()
        code_parts, class_parts, count_parts, spread = [], [], [], []
        for cls in range(c):
            zc = z[tr & (y == cls)]
            if not len(zc):
                continue
            m = min(cfg.codes_per_class, len(zc))
            w, a = lloyd(zc, mu + sd * torch.randn(m, z.shape[1], generator=gen), cfg.iterations)
            n = torch.bincount(a, minlength=m)
            keep = n > 0
            spread += [zc[a == j, :x.shape[1]].std(0, unbiased=False).mean() if n[j] > 1 else torch.tensor(0.0)
                       for j in torch.nonzero(keep).flatten()]
            code_parts.append(w[keep])
            class_parts.append(torch.full((int(keep.sum()),), cls))
            count_parts.append(n[keep])
        codes, classes, counts = torch.cat(code_parts), torch.cat(class_parts), torch.cat(count_parts)
        assign = (F.normalize(z, dim=1) @ F.normalize(codes, dim=1).T).argmax(1)
        holds = torch.bincount(assign, minlength=len(codes)).float()
        return {"codewords": codes[:, :x.shape[1]], "classes": classes.float(), "counts": counts.float(),
                "spread": torch.stack(spread), "edges": code_edges(assign, client.edge_index, len(codes)),
                "holds": holds, "label_counts": label_counts(client, c)}

    def upload_shapes(self, num_features, num_classes, hidden=None):
        m = "codes"  # the client's number of codewords, the same in every tensor
        return {"codewords": (m, num_features), "classes": (m,), "counts": (m,), "spread": (m,),
                "edges": (m, m), "holds": (m,), "label_counts": (num_classes,)}

    def synthesize(self, ctx, messages):
        cfg, gen = self.cfg, ctx.generator(-1, salt=6)
        counts = torch.cat([m["counts"] for m in messages])
        sizes = allocate(counts, cfg.synthetic_nodes)
        xs, ys, edges, offset = [], [], [], 0
        for m, n in zip(messages, torch.split(sizes, [len(m["counts"]) for m in messages]), strict=True):
            rates = m["edges"] / (m["holds"][:, None] * m["holds"][None, :]).clamp_min(1.0)
            ei = block_edges(n, rates * (m["holds"].sum() / n.sum().clamp_min(1)), gen)
            feat = torch.repeat_interleave(m["codewords"], n, dim=0)
            sd = torch.repeat_interleave(m["spread"], n)[:, None]
            xs.append((feat + cfg.noise * sd * torch.randn(feat.shape, generator=gen)).clamp_min(0))
            ys.append(torch.repeat_interleave(m["classes"].round().long(), n))
            edges.append(ei + offset)
            offset += int(n.sum())
        return SyntheticGraph(torch.cat(xs), torch.cat(ys), torch.cat(edges, 1))
