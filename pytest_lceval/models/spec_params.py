"""The ``?key=value&...`` parameters of a model spec (``mock:grep?window=512``), read against
the keys the backend declares: a mistyped key was silently ignored, and the run measured a model
other than the one the user described."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from urllib.parse import parse_qsl


def spec_params(query: str, known: Collection[str], backend: str) -> dict[str, str]:
    """The parameters of ``query`` (the text after '?'); ValueError naming an unknown key, the
    closest known one and every key ``backend`` knows."""
    pairs = parse_qsl(query, keep_blank_values=True)
    for key, _ in pairs:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"unknown parameter {key!r}{hint}: {backend} knows "
                             f"{', '.join(sorted(known))}")
    return {key: value for key, value in pairs if value}  # 'key=' means the default
