"""python -m pytest_lceval.fetch NAME... : fetch what suites (or named data sets) read.

    python -m pytest_lceval.fetch recall icl --plan     # what would be downloaded, and its size
    python -m pytest_lceval.fetch recall icl            # then run with --lceval-data DEST
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .catalog import default_dest, known_suites, select
from .declared import declared_releases
from .download import MIRROR_ENV, FetchError, FetchInterrupted, fetch, plan


def main(argv: Sequence[str] | None = None) -> int:
    releases = declared_releases()
    parser = argparse.ArgumentParser(
        prog="python -m pytest_lceval.fetch",
        description="Download the public data sets the named suites read into a data "
                    "directory (hub files through huggingface_hub and its cache).")
    parser.add_argument("names", nargs="+", metavar="NAME",
                        help=f"a suite ({', '.join(sorted(known_suites(releases)))}), a data "
                             f"set ({', '.join(r.name for r in releases)}) or all")
    parser.add_argument("--dest", type=Path, default=default_dest(),
                        help="the data directory to fill (default %(default)s)")
    parser.add_argument("--plan", action="store_true",
                        help="only say what is present and what would be downloaded")
    parser.add_argument("--mirror", default=os.environ.get(MIRROR_ENV),
                        help=f"read plain URLs from MIRROR/<host>/<path> (env {MIRROR_ENV}); "
                             f"hub files follow HF_ENDPOINT")
    args = parser.parse_args(argv)
    try:
        the_plan = plan(select(releases, args.names), args.dest)
        print("\n".join(the_plan.lines()), flush=True)
        if args.plan:
            return 0
        outcome = fetch(the_plan, lambda line: print(line, file=sys.stderr, flush=True),
                        args.mirror)
    except (ValueError, FetchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        kept = str(exc) if isinstance(exc, FetchInterrupted) else "nothing was downloaded yet"
        print(f"fetch: interrupted: {kept}; run the same command again to resume",
              file=sys.stderr)
        return 2
    if outcome.missing:
        print(f"fetch: {len(outcome.missing)} data sets missing (offline); place them as "
              f"above, then run with --lceval-data {args.dest}")
        return 1
    print(f"fetch: done ({len(outcome.downloaded)} fetched, {len(outcome.present)} already "
          f"present); run with --lceval-data {args.dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
