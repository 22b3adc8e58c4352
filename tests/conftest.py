"""Test-suite settings shared by every test module.

Hypothesis runs under one of two profiles: "ci" (chosen when the CI environment variable is set, as `.ci/run` sets it)
is derandomized, so a CI run is repeatable and passes or fails the same way on every machine; "dev" (everywhere else)
draws new examples on every run, so local runs keep exploring. Cases that a random run once found are pinned as
explicit `@example`s in the tests themselves. HYPOTHESIS_PROFILE overrides the choice.

Ctrl-C: the fault tests send SIGINT to the commands they start, as a terminal does. A process started in the
background of a non-interactive shell (`pytest &`, `nohup pytest &`) ignores SIGINT, and every process it starts
inherits that, so those commands would not stop. The suite gives itself Python's own Ctrl-C handler back: a handler
is reset to the default in the programs it starts, where being ignored is not.
"""

from __future__ import annotations

import os
import signal

from hypothesis import settings

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# No deadline: the tests share the machine's cores (pytest-xdist), and a slow example is not a wrong one.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
