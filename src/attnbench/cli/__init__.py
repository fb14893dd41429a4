"""Command line: argument parsing, progress, logging handlers."""
