"""Reproducible performance measurements of fedpriv (not tests): ``python benchmarks/run.py``."""
