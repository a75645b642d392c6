"""What HELMET's realistic categories share: passage formatting and packing (``passages``), and
fetching HELMET's released data (``fetch``)."""
