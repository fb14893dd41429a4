"""Rendering of what analysis computes: terminal tables now, the offline HTML report later."""
