"""Planner, isolated workers, outcome states, resume."""
