"""pytest-lceval: long-context language-model evaluation as pytest suites."""

__version__ = "0.1.0"
