"""A run's files: every path of a run, its lock, records, index entry, listing and prune, and
the readers of saved groups and results."""
