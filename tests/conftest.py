"""Shared pytest set-up: Hypothesis profiles.

``ci`` (the default; the same examples on every run) and ``deep`` (10x the examples, drawn
afresh each run): select with ``HYPOTHESIS_PROFILE=deep``.
Property tests size themselves with :func:`tests.helpers.examples`, which scales a test's own
example count by the active profile, so a costly property stays relatively small.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: examples per property test under the ``ci`` profile when a test does not say otherwise
CI_EXAMPLES = 100

settings.register_profile(
    "ci",
    max_examples=CI_EXAMPLES,
    deadline=None,
    # the same examples on every run: a CI run's time and verdict do not depend on the draw (a
    # random draw of the scenario fuzz once played episodes for over ten minutes); the deep
    # profile keeps drawing afresh
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=10 * CI_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
