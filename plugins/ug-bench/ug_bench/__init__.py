"""ug-bench: the `ug bench` command (`plugin` registers it, `bench` is the benchmark)."""
