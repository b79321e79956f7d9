"""The Arrow trace directory: the contract between collection and analysis."""
