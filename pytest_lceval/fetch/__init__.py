"""One way to get the data: every public release the selected suites read, fetched into a data
directory with a plan first, progress, checks and resumption (``download``), from the releases
the benchmark families declare (``catalog`` says what a release is, ``declared`` asks the
plugins for them); ``python -m pytest_lceval.fetch`` and ``--lceval-fetch`` (``fetch_plugin``)."""
