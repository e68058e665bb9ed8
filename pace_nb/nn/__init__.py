"""Layer 2: the GCN (parameter dicts, batched forward) and the batched client × seed trainer."""
