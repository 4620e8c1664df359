"""Shared pytest configuration: hypothesis profiles sized for CI (2 cores, bounded time);
the web app's default fixtures (a test module that needs another configuration defines its
own ``app`` / ``client``)."""
import os

import pytest
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


@pytest.fixture(scope="module")
def app():
    """The web app with a fresh store, its measurement jobs run in this process (one per
    test module: :func:`inline_service.make_test_app`)."""
    from inline_service import make_test_app
    return make_test_app()


@pytest.fixture()
def client(app):
    """A Flask test client of :func:`app` (its own cookies for each test)."""
    return app.test_client()
