"""Repository-level defaults for `pytest suites/` from a checkout.

The plugin itself is installed through the `pytest11` entry point (pip install -e .); this file
only keeps the checkout's own test runs from writing reports outside the repository.
"""
