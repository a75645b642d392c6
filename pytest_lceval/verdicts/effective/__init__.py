"""RULER's effective context length (the longest length at which the score stays at or above a
threshold) per task and per suite, against the model's claimed window and a saved baseline.

- ``length``: the definition, computed from cells' per-case scores.
- ``rows``: the rows the summary and the HTML report show, with the baseline's.
- ``effective_plugin``: the options (``--lceval-effective-threshold``,
  ``--lceval-effective-gate``) and the gate that fails a run whose effective length fell below
  the baseline's.
"""
