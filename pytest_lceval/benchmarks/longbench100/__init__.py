"""100-LongBench: its tasks built from real articles, the prior-knowledge filter and LongScore."""
