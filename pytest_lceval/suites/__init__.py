"""The evaluation suites as installed test modules, so a wheel runs them from any directory:
``pytest --pyargs pytest_lceval.suites --model=smollm2``.

The repository's ``suites/`` is a link to this folder, so ``pytest suites/`` runs these very
files (test ids ``suites/test_recall.py::test_recall[...]``); a suite's test module is written
once, here.
"""
