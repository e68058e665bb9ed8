"""Layer 1: datasets, partitions, the federated graph (clients + masks), perturbations.

``pace_nb.data`` also re-exports :mod:`pace_nb.data.datasets` (the former flat module
``pace_nb.data``), so ``from pace_nb.data import load_dataset`` keeps working.
"""
from pace_nb.data.datasets import *  # noqa: F401,F403
from pace_nb.data.datasets import (DATASETS, canonical_name, data_root, dataset_status, get_spec,  # noqa: F401
                                   load_dataset, missing_files, raw_dir)
