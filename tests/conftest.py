"""Shared pytest configuration: hypothesis profiles sized for CI (2 cores, bounded time)."""
import os

from hypothesis import HealthCheck, settings

# CI gates what lands, so its examples are the same on every run (derandomize): a property
# that held here holds there. Exploring for new counterexamples is the job of "thorough"
# (random, 500 examples): HYPOTHESIS_PROFILE=thorough ./run-tests.sh -k <area>.
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
