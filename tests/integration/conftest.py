"""The integration tier: a real Redis broker and real Celery worker processes."""

from __future__ import annotations

import shutil

import pytest

from config.celery import app as celery_app
from tests.conftest import TEST_REDIS_URL, require

from .services import redis_ping
from .slurm_harness import slurm_cluster  # noqa: F401 - a session fixture for this tier

REDIS_URL = TEST_REDIS_URL


@pytest.fixture
def redis_url() -> str:
    require(redis_ping(REDIS_URL), f"no Redis at {REDIS_URL} (apt-get install redis-server)")
    return REDIS_URL


@pytest.fixture
def redis_binary() -> str:
    path = shutil.which("redis-server")
    require(path is not None, "redis-server not found (apt-get install redis-server)")
    return path


@pytest.fixture
def use_broker():
    """Point this process's Celery app at a broker: tasks go to Redis, not in-process."""
    from inventory.tasks import broker

    saved = (celery_app.conf.broker_url, celery_app.conf.task_always_eager)

    def use(url: str) -> None:
        broker.reset()  # as a fresh web process: no memory of another broker's failures
        celery_app.conf.broker_url = url
        celery_app.conf.task_always_eager = False
        celery_app._pool = None  # connections and producers are cached per broker URL
        celery_app.amqp._producer_pool = None

    yield use
    broker.reset()
    celery_app.conf.broker_url, celery_app.conf.task_always_eager = saved
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
