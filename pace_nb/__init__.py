"""pace_nb — one-shot federated graph learning: PACE and SPEAR, reproducible."""
__version__ = "0.1.0"
