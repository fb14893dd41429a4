"""attnbench selftest: the shipped misbehaving kernels (kernels.py), their classes and verdicts (classes.py),
the run (suite.py)."""
