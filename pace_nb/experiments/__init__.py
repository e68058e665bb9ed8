"""Layer 4: grid configs and runner, the results store, Ray scale-out."""
