"""Saved runs and the paired regression verdict (``--lceval-save`` / ``--lceval-compare``).

In the spirit of pytest-benchmark's ``--benchmark-save``/``--benchmark-compare``: a saved run
keeps every cell's per-case scores and case keys (request hashes), not only means, because the
verdict is a *paired* test. Cases are deterministic in (task, length, depth, index, seed) and the
model's tokenizer, so two runs' scores pair case by case; when no case key matches, the runs
measured different prompts and the comparison is refused with the likely cause
(runs that share only some cases, e.g. with different --samples, pair on those).

Cells pair by test id (pytest's nodeid). A cell "regressed" when its drop is significant *and*
at least ``--lceval-min-drop`` (see :class:`pytest_lceval.verdicts.stats.PairedComparison`): the
evidence of where a model lost. What fails the run is the same rule on the cases of every
compared cell of a suite and of each task, pooled (``pooled.py``), with the family-wise error at
alpha.

The saved-run file and case pairing live in ``saved.py``; the criterion that compares each cell
in ``criterion.py``; the options, the coverage gate and the session hook in
``baseline_plugin.py``; the suite and task gates over every compared cell's pooled cases
in ``pooled.py`` and what a run's plan can detect in ``power.py``, both wired by
``pooled_plugin.py`` (the pytest plugins that plugin.py lists).
"""
