"""What HELMET's realistic categories share: passage formatting and packing (``passages``);
HELMET's released data is fetched by the core's fetch/catalog.py entries."""
