"""The conformance layer: a package, so its test modules may share names with tests/."""
