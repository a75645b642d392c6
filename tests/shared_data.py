"""Where the public data sets are for tests: $LCEVAL_DATA, else CI's ../shared/data.

Read once at import (collection), before tests/conftest.py removes $LCEVAL_DATA from the
environment so that it never leaks into pytester runs; tests that need the data pass it on
explicitly.
"""

import os
from pathlib import Path

SHARED_DATA = Path(os.environ.get("LCEVAL_DATA") or
                   Path(__file__).resolve().parents[2] / "shared" / "data")
