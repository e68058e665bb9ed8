"""SPEAR analyses (pace_nb.methods.spear.analysis) and the ``pace-nb spear`` command, on synthetic federations."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import silhouette_score

from pace_nb.methods.spear import core as sp
from pace_nb.methods.spear import analysis as sa
from pace_nb.core.errors import ConfigError, UnknownNameError
from pace_nb.nn.gcn import gcn_forward, init_params, num_params_bytes, propagation_matrix

from synthetic import PARTS3, make_fed

SCHEMA = ["dataset", "partition", "num_clients", "seed", "method", "variant", "rank", "receiver", "acc", "params"]


def fed(**kw):
    fg = make_fed(PARTS3, **kw)
    fg.config = {"scheme": "dirichlet", "beta": 0.05, "seed": 7}
    return fg


def test_ablation_rows_and_semantics():
    fg = fed()
    df = sa.ablation(fg)
    assert list(df["variant"]) == ["full", "no_shrinkage", "no_ppr", "no_both"]
    assert set(SCHEMA) <= set(df.columns) and {"beta", "gamma", "T", "a"} <= set(df.columns)
    assert (df["method"] == "spear").all() and (df["seed"] == 7).all() and (df["beta"] == 0.05).all()
    for _, r in df.iterrows():  # percent of the independent run
        ref = sp.run_spear(fg, sp.SpearConfig(), r["variant"])
        assert r["acc"] == pytest.approx(100 * ref.acc)
    assert df.set_index("variant").loc["no_ppr", "T"] == 0
    assert json.loads(df.loc[0, "params"])["gamma"] == 0.1


def test_robustness_drop_and_zero_noise():
    fg = fed()
    df = sa.robustness(fg, rho=0.5, eta=0.5, seed=1)
    assert list(df["condition"]) == ["clean", "edges", "features"] and (df["scope"] == "clients").all()
    assert df["drop"].tolist() == pytest.approx((df["acc"].iloc[0] - df["acc"]).tolist())
    assert df.loc[1, "rho"] == 0.5 and df.loc[2, "eta"] == 0.5 and df.loc[0, "drop"] == 0
    zero = sa.robustness(fg, rho=0.0, eta=0.0)
    assert (zero["drop"].abs() < 1e-9).all()


def test_hyperparameter_sweeps_agree_with_direct_runs():
    fg = fed()
    dT = sa.sweep_hyperparameter(fg, "T", [0, 1, 3])
    assert dT["T"].tolist() == [0, 1, 3] and (dT["swept"] == "T").all()
    assert dT["acc"].iloc[0] == pytest.approx(100 * sp.run_spear(fg, sp.SpearConfig(), "no_ppr").acc)
    assert dT["acc"].iloc[2] == pytest.approx(100 * sp.run_spear(fg, sp.SpearConfig(T=3)).acc)
    da = sa.sweep_hyperparameter(fg, "a", [0.0, 0.9])
    assert da["acc"].iloc[0] == pytest.approx(dT["acc"].iloc[0])  # a = 0 ≡ T = 0
    dg = sa.sweep_hyperparameter(fg, "gamma")
    assert dg["gamma"].tolist() == list(sa.HYPER_GRIDS["gamma"])
    assert dg["gamma"].max() / dg["gamma"].min() >= 100  # two orders of magnitude
    with pytest.raises(UnknownNameError, match="sweep parameter"):
        sa.sweep_hyperparameter(fg, "lr", [1])


def test_federation_sweep_uses_builder_per_value_and_seed():
    calls = []

    def builder(dataset, beta, num_clients, seed):
        calls.append((beta, num_clients, seed))
        g = make_fed(PARTS3, seed=seed)
        g.config = {"scheme": "dirichlet", "beta": beta, "seed": seed}
        return g

    df = sa.sweep_federation("synthetic", "beta", [0.05, 0.25], seeds=(1, 2), builder=builder)
    assert calls == [(0.05, 10, 1), (0.05, 10, 2), (0.25, 10, 1), (0.25, 10, 2)]
    assert df["beta"].tolist() == [0.05, 0.05, 0.25, 0.25] and df["seed"].tolist() == [1, 2, 1, 2]
    with pytest.raises(UnknownNameError):
        sa.sweep_federation("synthetic", "rounds", [1], builder=builder)

    def picky(dataset, beta, num_clients, seed):
        if num_clients > 5:
            raise ConfigError("cannot split")
        return builder(dataset, beta, num_clients, seed)

    dk = sa.sweep_federation("synthetic", "num_clients", [3, 20], builder=picky)
    assert dk["note"].tolist() == ["", "cannot split"] and np.isnan(dk["acc"].iloc[1])
    with pytest.raises(ConfigError, match="cannot split"):
        sa.sweep_federation("synthetic", "num_clients", [20], builder=picky, skip_infeasible=False)


def test_communication_bytes_and_multi_round_reference():
    fg = fed()
    P, N = sp.client_prototypes(fg)
    model = init_params(fg.num_features, fg.num_classes, 8, seed=0)
    df = sa.communication(fg, multi_round=lambda g, rounds: [model] * g.num_clients, rounds=5)
    spear_row, fedavg = df.iloc[0], df.iloc[1]
    assert spear_row["bytes_up"] == sum(len(sp.serialize_upload(P[k], N[k])) for k in range(3))
    assert spear_row["seconds"] > 0 and fedavg["method"] == "fedavg"
    assert fedavg["bytes_total"] == 2 * 5 * 3 * num_params_bytes(model)
    logits = gcn_forward(model, fg.data.x, propagation_matrix(fg.data.edge_index, fg.data.num_nodes))
    te = fg.global_mask("test")
    assert fedavg["acc"] == pytest.approx(100 * float((logits.argmax(1)[te] == fg.data.y[te]).float().mean()))


def test_silhouette_matches_sklearn_and_skips_zero_rows():
    rng = np.random.default_rng(0)
    h = np.vstack([rng.normal(size=(30, 5)) + 4 * np.eye(5)[0], rng.normal(size=(30, 5)) + 4 * np.eye(5)[1]])
    y = np.repeat([0, 1], 30)
    assert sa.silhouette(h, y, sample_size=None) == pytest.approx(silhouette_score(h, y, metric="cosine"))
    h0 = np.vstack([h, np.zeros((3, 5))])
    assert sa.silhouette(h0, np.r_[y, [0, 1, 0]], sample_size=None) == pytest.approx(sa.silhouette(h, y, None))
    sub = sa.silhouette(h, y, sample_size=40, seed=3)
    assert sub == sa.silhouette(h, y, sample_size=40, seed=3) and -1 <= sub <= 1


def test_hidden_representation_is_per_client_gcn_layer1():
    fg = fed()
    models = [init_params(fg.num_features, fg.num_classes, 6, seed=k) for k in range(3)]
    H = sa.hidden_representation(fg, models)
    c = fg.clients[2]
    _, h = gcn_forward(models[2], c.x, propagation_matrix(c.edge_index, c.num_nodes), return_hidden=True)
    assert H.shape == (60, 6) and torch.allclose(H[c.global_ids], h, atol=1e-6)
    Z = sa.spear_representation(fg)
    assert torch.allclose(Z[c.global_ids], sp.ppr_propagate(c.x, c.edge_index, 2, 0.5))


def test_prototype_alignment_by_hand():
    fg = fed()
    df, arr = sa.prototype_alignment(fg)
    assert df["centroids"].tolist() == ["client", "global"]
    z, y = sp.global_representation(fg, 2, 0.5), fg.data.y
    cent = torch.stack([z[y == c].mean(0) for c in range(fg.num_classes)])
    cosd = lambda a, b: 1 - float(torch.dot(a / a.norm(), b / b.norm()))
    glob = np.mean([cosd(arr["g"][c], cent[c]) for c in range(fg.num_classes)])
    held = [(k, c) for k in range(3) for c in range(fg.num_classes) if arr["N"][k, c] > 0]
    loc = np.mean([cosd(arr["P"][k, c], cent[c]) for k, c in held])
    row = df.set_index("centroids").loc["global"]
    assert row["global_dist"] == pytest.approx(glob, abs=1e-5) and row["local_dist"] == pytest.approx(loc, abs=1e-5)
    assert row["n_local"] == len(held)


def test_representation_study_with_custom_hidden_and_umap(tmp_path, monkeypatch):
    monkeypatch.setenv("PACE_NB_CACHE", str(tmp_path))
    fg = fed()
    fake = {"noise": lambda g: torch.randn(g.data.num_nodes, 4, generator=torch.Generator().manual_seed(0))}
    rows, coords = sa.representation_study(fg, hidden=fake, umap=True, seed=0)
    assert rows["representation"].tolist() == ["raw", "spear", "noise"]
    raw = rows.set_index("representation").loc["raw", "silhouette"]
    assert raw == pytest.approx(silhouette_score(fg.data.x.numpy(), fg.data.y.numpy(), metric="cosine"))
    assert len(coords) == 3 * 60 and set(coords.columns) >= {"x", "y", "label", "client", "representation"}
    cached = list((tmp_path / "umap").glob("*.npz"))
    assert len(cached) == 3
    again = sa.umap_embedding(fake["noise"](fg).numpy(), seed=0)  # served from the cache
    assert np.allclose(again, coords[coords.representation == "noise"][["x", "y"]].to_numpy())
    pu = sa.prototype_umap(fg, seed=0)
    n_local = int((sp.client_prototypes(fg)[1] > 0).sum())
    assert pu["kind"].value_counts().to_dict() == {"node": 60, "local": n_local, "global": fg.num_classes}


def test_command_prints_and_writes_json(tmp_path, monkeypatch, capsys):
    from pace_nb.cli import main

    def builder(dataset, beta, num_clients, seed, data_root=None):
        g = make_fed(PARTS3, seed=seed)
        g.config = {"scheme": "dirichlet", "beta": beta, "seed": seed}
        return g

    monkeypatch.setattr(sa, "federation", builder)
    out = tmp_path / "s.json"
    assert main(["spear", "--seeds", "1,2", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "w/o shrinkage" in text and "±" in text
    js = json.loads(out.read_text())
    summ = pd.DataFrame(js["summary"])
    assert summ["variant"].tolist() == ["full", "no_shrinkage", "no_ppr", "no_both"]
    full = [100 * sp.run_spear(builder("x", 0.05, 10, s)).acc for s in (1, 2, 3)]
    assert summ.loc[0, "acc_mean"] == pytest.approx(np.mean(full)) and summ.loc[0, "acc_std"] == pytest.approx(np.std(full, ddof=1))
    assert main(["spear", "--seeds", "1", "--no-ablation"]) == 0
    assert "w/o" not in capsys.readouterr().out
    assert main(["spear", "--seeds", "1", "--a", "1.0"]) == 2
    assert "propagation weight" in capsys.readouterr().err


def test_federated_models_stages():
    fg = fed()
    dep = sa.federated_models(fg, "fedavg", rounds=1, local_epochs=2)
    tra = sa.federated_models(fg, "fedavg", rounds=1, local_epochs=2, stage="trained")
    assert len(dep) == len(tra) == 3
    assert all(torch.equal(dep[0][n], dep[k][n]) for k in (1, 2) for n in dep[0])  # FedAvg: one global model
    assert not torch.equal(tra[0]["conv1.weight"], tra[1]["conv1.weight"])           # local updates differ
    with pytest.raises(UnknownNameError, match="stage"):
        sa.federated_models(fg, "fedavg", rounds=1, stage="final")


def test_silhouette_readings_confound_by_hand_and_central_summaries():
    from pace_nb.methods.spear import readings as rd
    from pace_nb.nn.gcn import init_params

    fg = fed()
    owner, y = sa.client_of_nodes(fg), fg.data.y.view(-1).numpy()
    keep = owner >= 0
    o, c = owner[keep], y[keep]
    # one-hot client vectors: cosine distance 0 within a client, 1 across clients
    dist = (o[:, None] != o[None, :]).astype(float)
    s = []
    for i in range(len(o)):
        same = (c == c[i]) & (np.arange(len(o)) != i)
        if not same.any():
            s.append(0.0)
            continue
        a = dist[i, same].mean()
        b = min(dist[i, c == k].mean() for k in np.unique(c) if k != c[i])
        s.append((b - a) / max(a, b) if max(a, b) > 0 else 0.0)
    assert rd.confound_score(fg, sample_size=None) == pytest.approx(float(np.mean(s)), abs=1e-9)
    models = [init_params(fg.num_features, fg.num_classes, 16, k) for k in range(fg.num_clients)]
    df = rd.silhouette_readings(fg, methods=("given",), models={"given": models}, sample_size=None)
    cen = df[(df.reading == "central") & (df.stat == "")]
    assert list(cen.receiver) == list(range(fg.num_clients))
    summ = df[df.stat != ""].set_index("stat").silhouette
    assert summ["mean"] == pytest.approx(cen.silhouette.mean()) and summ["min"] == pytest.approx(cen.silhouette.min())
    h0 = rd.complete_graph_hidden(fg, models[0]).numpy()[keep]
    assert cen.silhouette.iloc[0] == pytest.approx(sa.silhouette(h0, c, None))
    assert set(df.reading) == {"confound", "class", "client", "central"}


def test_comparison_table_shows_dense_beside_its_teachers_ensemble():
    """DENSE's row records its teachers' ensemble in params; SPEAR's Tab. 1 shows it as a row of
    its own ("DENSE [teachers' ensemble]"), the Tab. 3 cost table does not."""
    import json

    import pandas as pd

    from pace_nb.analysis import spear_comparison as sc
    from pace_nb.analysis.paper_values import paper_values
    from pace_nb.methods.evaluation import make_row

    rows = pd.DataFrame([make_row(dataset="Cora", partition="dirichlet", num_clients=10, seed=s, method="dense",
                                  variant="native", rank=0, receiver=-1, acc=a, f1_weighted=a, f1_macro=a,
                                  bytes_up=1000.0, bytes_down=0.0, seconds=5.0,
                                  params={"beta": 0.05, "evaluation": "complete_graph", "teacher_ensemble_acc": t,
                                          "teacher_ensemble_f1_macro": t / 2})
                         for s, a, t in ((2024, 15.0, 21.0), (2025, 17.0, 25.0))])
    main = sc.entries("main", paper_values("spear", table="main"), rows)
    dense = main[(main.dataset == "Cora") & (main.method == "dense")]
    assert sorted(dense.variant) == ["native", "teacher_ensemble"]
    got = {e.variant: (sc.label(e), s[0], s[2]) for (_, e), s in zip(dense.iterrows(), sc.scores(dense, rows), strict=True)}
    assert got == {"native": ("DENSE", 16.0, 2), "teacher_ensemble": ("DENSE [teachers' ensemble]", 23.0, 2)}
    cost = sc.entries("cost", paper_values("spear", table="cost"), rows)
    assert set(cost[cost.method == "dense"].variant) == {"native"}
    assert json.loads(rows.params[0])["teacher_ensemble_acc"] == 21.0  # the rows themselves are untouched


def test_spear_rows_carry_their_dimensions():
    """SPEAR's analyses: study "spear" on the complete graph, seed = data seed, no run seed; the
    robustness rows name their scope; the efficiency's default FedAvg run has the first paper seed."""
    from pace_nb.core.config import PAPER_SEEDS

    fg = fed()
    cfg = fg.config
    for frame in (sa.ablation(fg), sa.robustness(fg, scope="clients"), sa.sweep_hyperparameter(fg, "T", [0, 1])):
        assert set(frame.study) == {"spear"} and set(frame.evaluation) == {"complete_graph"}
        assert set(frame.seed) == set(frame.data_seed) == {cfg["seed"]} and set(frame.run_seed) == {-1}
        assert np.allclose(frame.beta.astype(float), cfg["beta"])
    assert set(sa.robustness(fg, scope="global").scope) == {"global"} and set(sa.ablation(fg).scope) == {""}
    eff = sa.communication(fg, rounds=1).set_index("method")
    assert eff.run_seed.to_dict() == {"spear": -1, "fedavg": PAPER_SEEDS[0]} and set(eff.study) == {"spear"}
    given = sa.communication(fg, multi_round=lambda g, rounds: sa.federated_models(g, "fedavg", rounds), rounds=1)
    assert given.set_index("method").run_seed["fedavg"] == -1
