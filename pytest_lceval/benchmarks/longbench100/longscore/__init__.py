"""LongScore (100-LongBench, METHODS §4): a long cell's score relative to the model's own
short-context ability, LC_l = (S_l - Base) / Base.

- ``config``: the options (``--longscore-min``, ``--longscore-base-lengths``,
  ``--longscore-floor``) resolved into a frozen ``LongScoreSettings``.
- ``formula``: LC itself, the per-length mean and the interval carrying both numbers'
  uncertainty.
- ``base``: the base ability of a task, computed once through the store.
- ``criterion``: the judge hook that records LC_l with its bootstrap interval and asserts it.
- ``summary``: the session's Table-7-style summary (markdown, CSV) and LC-vs-length plot.
- ``longscore_plugin``: the pytest wiring.
"""
