"""SPEAR: training-free PPR prototypes with shrinkage (:mod:`.core`) and its analyses (:mod:`.analysis`)."""
