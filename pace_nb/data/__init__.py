"""Layer 1: datasets, partitions, the federated graph (clients + masks), perturbations."""
