"""Statistics, winners and ceilings: pure functions on DataFrames read from the store."""
