"""One package per benchmark family: its tasks, data readers, metrics, options and report
extras. The core reaches them only through the suites they declare (builtin_suites.py) and
the plugins they register."""
