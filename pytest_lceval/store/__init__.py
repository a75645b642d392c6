"""The content-addressed store of model answers (SQLite) and its start-up repair."""
