"""Repository-level pytest configuration for running from a checkout.

The plugin itself is loaded through the `pytest11` entry point (pip install -e .); the
`pytester` fixture, which the plugin's own tests use, must be enabled here, at the root.
"""

pytest_plugins = ["pytester"]
