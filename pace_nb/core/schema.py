"""The one result schema: row columns, setting keys, variant labels and the colour palette.

Every layer that builds, stores, summarises, tabulates or draws result rows takes its
names from here (docs/ARCHITECTURE.md, "Result rows").
"""
from __future__ import annotations

#: One tidy row per dataset × partition × K × seed × method × variant × rank × receiver;
#: ``receiver = -1`` is the pooled row, ``rank = 0`` dense / not applicable. Scores in percent.
COLUMNS: tuple[str, ...] = (
    "dataset", "partition", "num_clients", "seed", "method", "variant", "rank", "receiver",
    "acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external",
    "bytes_up", "bytes_down", "upload_ratio", "return_ratio", "seconds", "n_test", "params",
)
#: Row identity inside one cell of the store.
KEY_COLUMNS: tuple[str, ...] = ("dataset", "partition", "num_clients", "seed", "method", "variant", "rank",
                                "receiver")
FLOAT_COLUMNS: tuple[str, ...] = ("acc", "f1_weighted", "f1_macro", "alpha", "acc_local", "acc_external",
                                  "bytes_up", "bytes_down", "upload_ratio", "return_ratio", "seconds")
INT_COLUMNS: tuple[str, ...] = ("num_clients", "seed", "rank", "receiver")
STR_COLUMNS: tuple[str, ...] = ("dataset", "partition", "method", "variant", "params")
REQUIRED: tuple[str, ...] = KEY_COLUMNS + ("acc",)

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

#: Fixed colours so that a method looks the same in every figure of both papers, keyed by the
#: registry's canonical method id (and by variant / ablation name).
PALETTE: dict[str, str] = {
    "local": "#7f7f7f", "pace": "#d62728", "external": "#ff9896", "transport": "#ff7f0e",
    "fixed0.5": "#ffbb78", "mean": "#8c564b", "raw": "#c49c94", "direct": "#e377c2",
    "fedavg": "#1f77b4", "fedprox": "#aec7e8", "fednova": "#17becf", "fedrcl": "#9edae5",
    "fedpub": "#2ca02c", "fedtad": "#98df8a", "fedgta": "#9467bd", "fedaux1r": "#c5b0d5",
    "fedproto": "#bcbd22", "spear": "#d62728", "raw features": "#7f7f7f",
    "fedadam": "#393b79", "moon": "#e6550d",  # SPEAR's multi-round baselines
    "dense": "#636363", "fedcvae": "#8c6d31", "fedsd2c": "#e7298a", "ghost": "#e6ab02", "oasis": "#1b9e77",  # one-shot
    "centroid_sbm": "#117733",  # extra one-shot baseline (not in SPEAR's comparison)
    "no_shrinkage": "#1f77b4", "no_ppr": "#2ca02c", "no_both": "#7f7f7f",  # SPEAR ablations
}
#: Receiver-harm outcome colours (PACE Fig. 4c).
OUTCOME_COLORS: dict[str, str] = {"helped": "#2ca02c", "tied": "#bdbdbd", "harmed": "#d62728"}

