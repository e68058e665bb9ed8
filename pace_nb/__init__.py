"""pace_nb — one-shot federated graph learning: PACE and SPEAR, reproducible."""
import os as _os

# OpenMP threads that busy-wait stall badly when the cores are shared (measured: a 2-thread
# PubMed run 8x slower than 1 thread under load); passive waiting costs nothing when idle.
# Only effective when pace_nb is imported before torch; a user's setting always wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
