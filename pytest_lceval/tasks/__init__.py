"""Task generators: pure functions of (cell, tokenizer, seed) -> cases; no model calls."""
