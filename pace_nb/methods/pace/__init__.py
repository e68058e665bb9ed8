"""PACE (paper §3): low-rank carriers, propagated-moment sketches, RegMean transport, the protocol."""
