"""How torch's idle CPU threads wait for work: they sleep at once unless the user says otherwise.

torch runs its CPU kernels on an OpenMP team, and libgomp reads the wait policy once, when torch
is first imported. A decode step runs hundreds of short parallel regions with a little Python
between them, so the policy decides how a CPU shares its cores, measured on 2 cores (SmolLM2-135M,
two rows decoding over 1k tokens, ms per step; ``bench/bench_cpu_wait.py`` measures it again,
its last run: idle PASSIVE 162, default spin 82; one core held 134 against 325):

- idle machine: sleeping at once (``PASSIVE``) 103-154, libgomp's default spin 51-64;
- one core busy with another process: ``PASSIVE`` 82-100, the default spin 214-254, a spin
  bounded at 3,000 rounds 149-162, at 10,000 246-273.

The main job (``pytest suites/ --model=smollm2``, fresh clone, idle machine) decoding one token a
pass: 8 min 6 s and 462 s of model time sleeping, 6 min 58 s and 392 s with
``OMP_WAIT_POLICY=ACTIVE``.

Spinning wins on a machine the run has to itself and loses more, and slows the other process,
when anything else wants a core (xdist workers beside a served model, a second job). So the
plugin sleeps by default and the README says how a run that owns its machine spins instead.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

WAIT_ENVIRONMENT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
"""What sets the wait: the user's own value of either wins."""


def sleep_when_idle(environ: MutableMapping[str, str] | None = None) -> None:
    """Idle torch threads sleep, unless the environment already says how they wait. Takes effect
    only before torch is imported (the plugin's configure, a bench's first lines)."""
    environ = os.environ if environ is None else environ
    if not any(name in environ for name in WAIT_ENVIRONMENT):
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
