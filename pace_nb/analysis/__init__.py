"""Layer 4: summaries, App. A diagnostics, the papers' tables and their reported values."""
