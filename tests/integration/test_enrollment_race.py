"""Two agents enrolling as one server at the same moment, on real PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from inventory.models import AgentToken, Enrollment, EnrollmentToken, Server
from inventory.services import (
    EnrollmentIdentity,
    EnrollmentRefused,
    agent_enroll,
    enrollment_token_create,
)
from tests.conftest import require

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgres_only():
    require(connection.vendor == "postgresql", "needs DATABASE_URL=postgres://... (row locks)")


def enroll_together(keys: list[str], identity: EnrollmentIdentity) -> tuple[list, list]:
    barrier = threading.Barrier(len(keys))
    issued, refused, errors = [], [], []

    def run(key: str) -> None:
        try:
            barrier.wait(timeout=10)
            issued.append(agent_enroll(key=key, identity=identity))
        except EnrollmentRefused as exc:
            refused.append(exc.status_code)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(key,)) for key in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return issued, refused


@pytest.mark.parametrize("rounds", range(3))
@pytest.mark.parametrize("tokens", ["one", "two"])
def test_two_agents_with_one_identity_get_one_server_and_one_token(rounds, tokens):
    first = enrollment_token_create(uses=5)[1]
    keys = [first, first] if tokens == "one" else [first, enrollment_token_create(uses=5)[1]]
    identity = EnrollmentIdentity(hostname=f"race-{rounds}", system_uuid=f"uuid-race-{rounds}")
    issued, refused = enroll_together(keys, identity)
    assert len(issued) == 1 and refused == [409]
    assert Server.objects.count() == 1
    assert AgentToken.objects.filter(revoked_at__isnull=True).count() == 1
    assert Enrollment.objects.count() == 1
    assert sum(EnrollmentToken.objects.values_list("uses", flat=True)) == 1
