"""One way to get the data: every public release the selected suites read, fetched into a data
directory with a plan first, progress, checks and resumption (``download``), from the releases
``catalog`` declares; ``python -m pytest_lceval.fetch`` and ``--lceval-fetch``
(``fetch_plugin``)."""
