"""What a run records: typed records, each cell's result, the per-case sample log and the
files a run writes."""
