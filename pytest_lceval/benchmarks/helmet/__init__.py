"""What HELMET's realistic categories share: passage formatting and packing (``passages``);
the public releases its suites read (``releases``), declared to the fetch with ``--helmet-fetch``
(``data_plugin``)."""
