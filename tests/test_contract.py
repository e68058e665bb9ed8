"""No branch on a method id outside its own module (issue 40).

What a method does differently — its command-line options, its Flower adapter, the partition of
its paper's protocol, whether its rows carry a carrier rank, its row in SPEAR's comparison — is
declared by its class (``shared_options``, ``ranked``, ``partition``, its base class) and read
through the registry, so that a method that replaces ``pace`` or a plugin like it needs no edit
elsewhere. Every literal ``"pace"`` / ``"spear"`` outside ``methods/pace/`` and ``methods/spear/``
is listed below with its reason; a new one fails this test until it is removed or listed.

Reasons are of three kinds, named by their prefix:

* ``value:`` not a method id at all: a study, a paper, a cell kind, a config section, a command;
* ``table:`` a paper's table or figure naming the rows it shows (a definition of that table);
* ``data:`` a default or a record's layout (a value handed on, never compared).

A line shaped like a branch (``== "pace"``, ``in ("pace", …)``, ``.isin([… "spear"])``) may
only be a ``value:`` or a ``table:`` one: a method's behaviour is never chosen by its id.
"""
from __future__ import annotations

import re
from pathlib import Path

import pace_nb

PKG = Path(pace_nb.__file__).resolve().parent
OWN = ("methods/pace/", "methods/spear/")
ID = re.compile(r'"(?:pace|spear)"')
BRANCH = re.compile(r'(?:==|!=)\s*"(?:pace|spear)"|"(?:pace|spear)"\s*(?:==|!=)'
                    r'|\bin\s*[(\[][^)\]]*"(?:pace|spear)"|isin\(\s*\[[^\]]*"(?:pace|spear)"')

#: Modules that are one paper's own tables, figures or numbers: they name its rows throughout.
PAPER_MODULES = {
    "analysis/paper_values/": "table: the papers' published numbers, keyed by the papers' own row ids",
    "analysis/spear_tables.py": "table: SPEAR's Tab. 2/3/4 read SPEAR's own rows",
    "analysis/spear_comparison.py": "table: SPEAR's Tab. 1/3 (SPEAR's row is the full variant)",
    "analysis/diagnostics.py": "table: PACE App. A compares PACE's full rows with Local's",
    "viz/pace.py": "table: PACE's figures (its variants' labels and colours, its rows)",
    "viz/spear.py": "table: SPEAR's figures (its variants' colours, its rows)",
    "viz/widgets.py": "table: the explorers of PACE's figures (α, rank, receiver views of PACE's rows)",
    "viz/rank_data.py": "table: the rank explorer's data (PACE's full rows per rank, PACE − Local per client)",
    "viz/harm.py": "table: PACE App. A's harm figure, in PACE's colour",
    "viz/ablation.py": "table: PACE Tables 2 / 6 and SPEAR Tab. 2 as figures, in PACE's and SPEAR's colours",
    "viz/sweeps.py": "table: SPEAR's Fig. 4 (its variants' colours, SPEAR's row among the compared methods)",
}

#: (module, text on the line, reason) for every other literal id.
LINES = [
    ("analysis/draws_table.py", '("local", "native"), ("pace", "full")', "table: the Table 1 entries whose draws are measured"),
    ("analysis/readme_block.py", 'agreement(both, ("local", "pace"))', "table: the README's agreement line for Local and PACE"),
    ("analysis/readme_block.py", '("fedavg", "native"), ("pace", "full")', "table: the rows the README block shows"),
    ("analysis/readme_block.py", 'acc["method"] == "spear"', "table: the README's SPEAR section compares SPEAR's Tab. 1 row"),
    ("analysis/readme_block.py", 'acc["method"] != "spear"', "table: ... with the other rows of that table"),
    ("analysis/report.py", '("local", "pace")', "table: the report's agreement line for Local and PACE"),
    ("analysis/report.py", 'rows["method"] != "spear"', "table: the draws of PACE's tables leave SPEAR's own rows out"),
    ("analysis/tables.py", 's.method.isin(["local", "pace"])', "table: PACE Table 4's matched baseline is no row of its own"),
    ("analysis/tables.py", 'ours.get(*args, "pace"', "table: PACE Tables 4/6 read PACE's rows"),
    ("analysis/tables.py", 'TableDef("pace"', "value: the paper a table belongs to"),
    ("analysis/tables.py", 'TableDef("spear"', "value: the paper a table belongs to"),
    ("analysis/tables.py", 'kv[1].paper != "pace"', "value: tables ordered by paper"),
    ("analysis/tables.py", '("PACE" if e.method == "pace" else "Matched")', "table: PACE Table 4's row labels"),
    ("analysis/tables.py", 'treatment=("pace", "full"', "table: PACE App. A's treatment rows"),
    ("analysis/tables.py", 't.paper == "spear"', "value: a table's paper"),
    ("analysis/tables.py", 'paper_values("pace"', "value: the paper whose numbers are read"),
    ("analysis/tables.py", '("pace"/"spear" = all of one paper)', "value: a paper's name selects its tables"),
    ("analysis/tables.py", 'if item in ("pace", "spear")', "value: a paper's name selects its tables"),
    ("analysis/tables.py", '+ ["pace", "spear", "all"]', "value: the paper names a selection accepts"),
    ("analysis/tables.py", 't.paper != "spear"', "value: a table's paper"),
    ("cli/__init__.py", "COMMANDS = (", "value: the `pace-nb spear` command"),
    ("cli/commands/flower.py", 'p.add_argument("--method", default="pace"', "data: the default --method"),
    ("cli/commands/spear.py", 'sub.add_parser("spear"', "value: the `pace-nb spear` command"),
    ("cli/commands/spear.py", '"spear": [sec]', "value: the grid's [[spear]] section"),
    ("core/schema.py", '"pace" (PACE\'s one-shot protocol', "value: the study column's values"),
    ("core/schema.py", '"spear" (SPEAR\'s own analyses', "value: the study column's values"),
    ("core/schema.py", 'study "pace") or "complete_graph"', "value: the study column's values"),
    ("core/schema.py", 'studies "comparison" and "spear"', "value: the study column's values"),
    ("core/schema.py", 'in study "pace", ``data_seed``', "value: the study column's values"),
    ("core/schema.py", 'STUDIES: tuple[str, ...] = ("pace", "comparison", "spear")', "value: the study column's values"),
    ("experiments/cells.py", 'kind: str  # "protocol" | "spear"', "value: a cell's kind (the grid's [[spear]] section)"),
    ("experiments/cells.py", 'self.kind == "spear"', "value: a cell's kind"),
    ("experiments/cells.py", 'cell.kind == "spear"', "value: a cell's kind"),
    ("experiments/cells.py", '{"spear": "comm", "fedavg": "multiround"}', "table: SPEAR Tab. 3's rows as stored (variants)"),
("experiments/sections.py", 'SECTIONS = ("grid", "experiment", "spear")', "value: the config's sections"),
    ("experiments/sections.py", 'param(("spear",), NAMES', "data: the [[spear]] section's default methods"),
    ("experiments/sections.py", 'cfg.raw.get("spear", [])', "value: the [[spear]] section"),
    ("experiments/grid.py", 'Cell("spear"', "value: a cell's kind"),
    ("experiments/migration.py", '"spear" for SPEAR\'s analyses', "value: the study column's values"),
    ("experiments/migration.py", 'FedAvg row), else "pace".', "value: the study column's values"),
    ("experiments/migration.py", 'return "spear" if method == "spear"', "table: rows written before the study column: "
                                                                      "their method id is the only evidence of SPEAR's study"),
    ("experiments/migration.py", 'study != "pace"', "value: a study"),
    ("experiments/migration.py", 'study == "pace" else (PAPER_SEEDS[0] if study == "spear" and method != "spear"',
     "table: old rows: the efficiency's FedAvg row of SPEAR's study ran at the first paper seed"),
    ("experiments/migration.py", '"receivers" if study == "pace"', "value: a study"),
    ("experiments/store.py", '"spear" for', "value: the study column's values"),
    ("experiments/store.py", 'else "pace";', "value: the study column's values"),
    ("experiments/store.py", 'for study "pace"', "value: the study column's values"),
    ("experiments/store.py", 'outside study "pace"', "value: the study column's values"),
    ("experiments/store.py", 'in study "pace"', "value: the study column's values"),
    ("experiments/store.py", '(study "spear"', "value: the study column's values"),
    ("flower/settings.py", 'method: str = param("pace"', "data: the default Flower method"),
    ("methods/evaluation.py", '"pace", evaluation "receivers"', "value: the study column's values"),
    ("methods/evaluation.py", 'study="pace"', "value: the study of receiver-evaluated rows"),
    ("methods/protocol.py", 'methods: Sequence[str] = ("local", "pace")', "data: run_protocol's default methods"),
    ("methods/protocol.py", '``{"pace": {"variants"', "data: an example in a docstring"),
    ("methods/registry.py", 'paper = ("spear",) + group("multiround")', "table: SPEAR's comparison opens with SPEAR's row"),
    ("viz/frames.py", 'methods: Sequence[str] = ("local", "pace")', "data: the default methods of a notebook's rows"),
    ("viz/frames.py", '(rows["method"] == "pace") & (rows["variant"] == "full")', "table: PACE Table 3 / Fig. 4's rows"),
    ("viz/frames.py", '(pace_rows["method"] == "pace") & (pace_rows["receiver"] >= 0)', "table: PACE's per-silo α* (App. A)"),
    ("viz/frames.py", 'keyed[(d, m, "pace")] - keyed[(d, m, "local")]', "table: PACE Table 1's PACE − Local (Fig. 4's paper means)"),
    ("viz/frames.py", 'if (d, m, "pace") in keyed.index', "table: PACE Table 1's PACE − Local (Fig. 4's paper means)"),
    ("viz/reproduction.py", 'methods: Sequence[str] = ("local", "pace", "fedavg", "fedpub")', "table: the accuracy-vs-K figure's rows"),
]


def occurrences() -> list[tuple[str, int, str]]:
    """(module relative to the package, line number, line) of every literal method id outside the
    methods' own modules."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith(OWN):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ID.search(line):
                out.append((rel, i, line.strip()))
    return out


def _reason(rel: str, line: str) -> str | None:
    for prefix, why in PAPER_MODULES.items():
        if rel.startswith(prefix):
            return why
    return next((why for mod, text, why in LINES if mod == rel and text in line), None)


def test_every_literal_method_id_outside_its_module_has_a_reason():
    unlisted = [f"{rel}:{i}: {line}" for rel, i, line in occurrences() if _reason(rel, line) is None]
    assert not unlisted, ("a literal method id outside its own module (declare the difference on the method "
                          "class and read it through the registry, or list it here with its reason):\n"
                          + "\n".join(unlisted))


def test_no_branch_on_a_method_id():
    """A branch-shaped line is a paper table's row selection or not an id at all; never a
    method's behaviour chosen by its id."""
    bad = [f"{rel}:{i}: {line}  [{_reason(rel, line)}]" for rel, i, line in occurrences()
           if BRANCH.search(line) and not str(_reason(rel, line)).startswith(("value:", "table:"))]
    assert not bad, "branches on a method id outside its own module:\n" + "\n".join(bad)


def test_every_listed_line_is_still_there():
    """No stale reason: each listed line still occurs (else drop it from :data:`LINES`)."""
    found = occurrences()
    stale = [(mod, text) for mod, text, _ in LINES if not any(rel == mod and text in line for rel, _, line in found)]
    assert not stale, f"listed lines no longer found: {stale}"
    assert all(why.split(":")[0] in ("value", "table", "data") for *_, why in LINES + list(PAPER_MODULES.items()))


def test_the_differences_are_declared_on_the_classes():
    """What the removed branches decided is now the classes' metadata, read through the registry."""
    from pace_nb.methods.registry import ranked, registered, shared_options, with_shared_options

    reg = registered()
    assert shared_options("pace") == ("variants", "ranks") and ranked("pace")
    assert not any(ranked(m) or shared_options(m) for m in reg.names() if m != "pace")
    assert reg["pace"].partition == "louvain" and reg["spear"].partition == reg["fedcvae"].partition == "dirichlet"
    assert with_shared_options({"fedavg": {"rounds": 2}}, ["local", "PACE", "fedavg"], variants=("full",), ranks=(2,)) == {
        "fedavg": {"rounds": 2}, "pace": {"variants": ("full",), "ranks": (2,)}}
