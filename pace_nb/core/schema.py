"""The one result schema: row columns, setting keys, variant labels and the colour palette.

Every layer that builds, stores, summarises, tabulates or draws result rows takes its
names from here (docs/ARCHITECTURE.md, "Result rows").
"""
from __future__ import annotations

#: One tidy row per dataset × partition × K × seed × method × variant × rank × receiver;
#: ``receiver = -1`` is the pooled row, ``rank = 0`` dense / not applicable. Scores in percent.
#: The row's dimensions are columns, set by the row builders (``methods.evaluation.make_row``
#: callers); ``params`` (JSON) only records the hyperparameters that produced the row:
#:
#: * ``study``: which study wrote the row: "pace" (PACE's one-shot protocol, ``methods.protocol``),
#:   "comparison" (SPEAR's Tab. 1/3 comparison, ``methods.oneshot.compare``, and every one-shot
#:   baseline row), "spear" (SPEAR's own analyses, ``methods.spear.analysis``: ablation,
#:   robustness, sweeps, efficiency);
#: * ``evaluation``: "receivers" (PACE: each receiver's model on its own test mask, the pooled row
#:   concatenating them; study "pace") or "complete_graph" (SPEAR: the server's global model on the
#:   complete graph over the clients' test nodes; studies "comparison" and "spear");
#: * ``beta``: the Dirichlet concentration of the federation (NaN for other partitions);
#: * ``scope``: SPEAR's robustness perturbation scope, "clients" / "global" ("" elsewhere);
#: * ``data_seed``: the federation's data seed (partition and masks; -1 when unknown);
#: * ``run_seed``: the method's own seed (initialization, dropout, sampling); -1 for training-free
#:   SPEAR;
#: * ``seed`` (a key column, kept as stored): ``run_seed`` in study "pace", ``data_seed`` in the
#:   SPEAR studies (their multi-seed results vary the federation).
COLUMNS: tuple[str, ...] = (
    "dataset", "partition", "num_clients", "seed", "method", "variant", "rank", "receiver",
    "study", "evaluation", "beta", "scope", "data_seed", "run_seed",
    "acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external",
    "bytes_up", "bytes_down", "upload_ratio", "return_ratio", "seconds", "n_test", "params",
)
#: Row identity inside one cell of the store.
KEY_COLUMNS: tuple[str, ...] = ("dataset", "partition", "num_clients", "seed", "method", "variant", "rank",
                                "receiver")
FLOAT_COLUMNS: tuple[str, ...] = ("beta", "acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external",
                                  "bytes_up", "bytes_down", "upload_ratio", "return_ratio", "seconds")
INT_COLUMNS: tuple[str, ...] = ("num_clients", "seed", "rank", "receiver", "data_seed", "run_seed")
STR_COLUMNS: tuple[str, ...] = ("dataset", "partition", "method", "variant", "study", "evaluation", "scope", "params")
REQUIRED: tuple[str, ...] = KEY_COLUMNS + ("acc",)
#: Values of ``study`` and ``evaluation``.
STUDIES: tuple[str, ...] = ("pace", "comparison", "spear")
EVALUATIONS: tuple[str, ...] = ("receivers", "complete_graph")
#: What a summary says of the rows of each evaluation (a method's class declares its own, ``Method.evaluation``).
EVALUATION_LABELS: dict[str, str] = {
    "receivers": "each receiver's model on its own test nodes, pooled over the receivers",
    "complete_graph": "the server's global model on the complete graph, over every client's test nodes",
}

#: A federation setting (what diagnostics group by) and a method setting (what tables group by).
FEDERATION: tuple[str, ...] = ("dataset", "partition", "beta", "num_clients")
SETTING: tuple[str, ...] = FEDERATION + ("method", "variant", "rank")

#: Display names of PACE's variants and SPEAR's ablations (method labels: ``methods.registry.method_label``).
PACE_VARIANT_LABELS: dict[str, str] = {
    "native": "Local", "transport": "Transport (α=1)", "fixed0.5": "Fixed α=0.5", "mean": "Mean + CNLL",
    "raw": "Raw-Activation RegMean + CNLL", "direct": "Direct Return + CNLL", "full": "Full PACE",
}
SPEAR_VARIANT_LABELS: dict[str, str] = {"full": "SPEAR", "no_shrinkage": "w/o shrinkage", "no_ppr": "w/o PPR",
                                        "no_both": "w/o both"}

#: Fixed colours of the series that are not methods (PACE's variants, SPEAR's ablations, raw
#: features); a method's own colour and marker are declared on its class (``colour``/``marker``,
#: :mod:`pace_nb.methods.contract`) and read through the registry (:func:`pace_nb.viz.style.palette`). Okabe–Ito and Paul Tol colours,
#: assigned so that the methods sharing a figure stay apart under deuteranopia (CIE76 ΔE after the
#: Machado 2009 simulation, :mod:`pace_nb.viz.colour`; tests/viz/test_plots.py checks each figure's set).
#: Vermillion is PACE's and blue SPEAR's alone.
SERIES_PALETTE: dict[str, str] = {
    "raw features": "#999999",
    "external": "#332288",
    "transport": "#000000",
    "fixed0.5": "#228833",
    "mean": "#DDCC77",
    "raw": "#882255",
    "direct": "#332288",
    "no_shrinkage": "#999933",
    "no_ppr": "#661100",
    "no_both": "#EE99AA",
}
#: One marker per series (same keys as :data:`SERIES_PALETTE`): series that share a colour never share a marker.
SERIES_MARKERS: dict[str, str] = {
    "raw features": "s",
    "external": "D",
    "transport": "^",
    "fixed0.5": "v",
    "mean": "D",
    "raw": "P",
    "direct": "X",
    "no_shrinkage": "^",
    "no_ppr": "D",
    "no_both": "v",
}
#: Receiver-harm outcome colours (PACE Fig. 4c): blue / grey / orange, apart under deuteranopia.
OUTCOME_COLORS: dict[str, str] = {"helped": "#0072B2", "tied": "#DDDDDD", "harmed": "#E69F00"}
#: Communication directions (PACE Fig. 3, Table 3).
DIRECTION_COLORS: dict[str, str] = {"upload": "#332288", "return": "#E69F00"}
#: Categorical clients (up to 12; more cycle): Paul Tol's "muted" scheme plus pale grey and black.
CLIENT_COLORS: tuple[str, ...] = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677",
                                  "#882255", "#AA4499", "#000000", "#DDDDDD", "#777777")
