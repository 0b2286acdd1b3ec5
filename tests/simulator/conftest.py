"""The simulator's tests share the agent's fixtures: the report schema's validator."""

from tests.agent.conftest import validate  # noqa: F401 - a fixture, used by name
