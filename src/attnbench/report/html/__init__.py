"""The offline HTML report: a static site and publication figures built from any set of stores."""
