"""``--graph PATH``: a user's own graph file in place of ``--dataset`` (docs/OWN_DATA.md).

Shared by ``run``, ``spear`` and ``partition``: :func:`add_graph_argument` adds the option,
:func:`resolve_source` validates the file before any training and says what to pass on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """Where a command's graph comes from.

    ``dataset``: what ``build_federated`` / ``run_protocol`` take (a registered name or a graph
    path); ``name``: the dataset name the rows carry; ``record``: what configs record about it."""

    dataset: str
    name: str
    record: dict = field(default_factory=dict)


def add_graph_argument(parser, *, partition: bool = False) -> None:
    """Add ``--graph PATH`` (and, when ``partition``, SPEAR's ``--partition dirichlet|given``)."""
    parser.add_argument("--graph", default=None, metavar="PATH",
                        help="your own graph instead of --dataset: an .npz file or a folder of CSV files "
                             "(docs/OWN_DATA.md); with --partition given its client column defines the clients")
    if partition:
        parser.add_argument("--partition", default="dirichlet", choices=("dirichlet", "given"),
                            help="dirichlet (the paper's label skew, default) | given (the graph's client column)")


def resolve_source(args) -> Source:
    """Validate ``--graph`` (one-line errors, before any training) or resolve ``--dataset``."""
    if getattr(args, "graph", None) is None:
        from pace_nb.data.datasets import canonical_name

        name = canonical_name(args.dataset)
        return Source(name, name)
    from pace_nb.data.graph_cache import file_sha256
    from pace_nb.data.userdata import graph_files, load_graph

    data = load_graph(args.graph)
    path = Path(args.graph).expanduser().resolve()
    sha = {f.name: file_sha256(f) for f in graph_files(path)}
    return Source(str(path), data.name, {"graph": str(path), "graph_sha256": sha})


def given_federation(source: Source, seed: int, *, show: bool = True):
    """The federation of the graph's own clients (``--partition given``), its summary printed."""
    from pace_nb.data.federation import build_federated

    fg = build_federated(source.dataset, "given", seed=seed)
    if show:
        print_clients(fg)
    return fg


def print_clients(fg) -> None:
    """Per-client table (nodes, classes, edges kept, split sizes) and the share of edges kept."""
    table = fg.summary()
    kept, total = int(table["edges"].sum()), int(fg.data.edge_index.shape[1]) // 2
    masks = "the file's masks" if fg.config.get("masks") == "file" else \
        f"stratified {'/'.join(f'{r:g}' for r in fg.config['ratios'])} masks, data seed {fg.config['seed']}"
    print(f"{fg.dataset}: {int(fg.data.num_nodes)} nodes, {fg.num_classes} classes, {fg.num_clients} given clients "
          f"({masks})")
    print(table.to_string(index=False))
    print(f"edges kept inside clients: {kept}/{total} ({100 * kept / max(total, 1):.1f} %); "
          f"labels = per-class node counts")
    single = table[table["classes"] < 2]["client"].tolist()
    if single:
        print(f"note: client(s) {', '.join(map(str, single))} hold a single class: their Local model predicts "
              f"only that class")
