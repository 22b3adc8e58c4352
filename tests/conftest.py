"""Test-suite settings shared by every test module.

Hypothesis runs under one of two profiles: "ci" (chosen when the CI environment variable is set, as `.ci/run` sets it)
is derandomized, so a CI run is repeatable and passes or fails the same way on every machine; "dev" (everywhere else)
draws new examples on every run, so local runs keep exploring. Cases that a random run once found are pinned as
explicit `@example`s in the tests themselves. HYPOTHESIS_PROFILE overrides the choice.
"""

from __future__ import annotations

import os

from hypothesis import settings

# No deadline: the tests share the machine's cores (pytest-xdist), and a slow example is not a wrong one.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
