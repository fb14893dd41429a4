"""attnbench: truthful attention-kernel benchmarks (one row per attempt, every number checked)."""
__version__ = "0.1.0"
