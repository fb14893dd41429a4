"""The only places that touch timing, memory, dispatch probing, correctness and provenance."""
