"""Writes and side effects of the inventory layer. Views, tasks and commands call these."""

from .apply import ApplyResult, report_apply
from .enrollment import (
    EnrollmentIdentity,
    EnrollmentRefused,
    agent_enroll,
    enrollment_token_create,
    enrollment_token_revoke,
    parse_duration,
)
from .heartbeat import heartbeat_flush, heartbeat_seen
from .heartbeat_memory import heartbeat_memory_disable, heartbeat_memory_enable
from .ingest import (
    DigestRejected,
    ReceiveResult,
    ReportRejected,
    heartbeat_by_digest,
    heartbeat_digest,
    heartbeat_receive,
    parse_digest,
    report_receive,
)
from .reports import report_prune
from .revision import revision_bump, revision_get
from .tokens import (
    AgentTokenState,
    agent_token_authenticate,
    agent_token_create,
    agent_token_state,
    agent_token_unbind,
    user_token_authenticate,
    user_token_create,
    user_token_revoke,
)

__all__ = [
    "AgentTokenState",
    "ApplyResult",
    "DigestRejected",
    "EnrollmentIdentity",
    "EnrollmentRefused",
    "ReceiveResult",
    "ReportRejected",
    "agent_enroll",
    "agent_token_authenticate",
    "agent_token_create",
    "agent_token_state",
    "agent_token_unbind",
    "enrollment_token_create",
    "enrollment_token_revoke",
    "heartbeat_by_digest",
    "heartbeat_digest",
    "heartbeat_flush",
    "heartbeat_memory_disable",
    "heartbeat_memory_enable",
    "heartbeat_receive",
    "heartbeat_seen",
    "parse_digest",
    "parse_duration",
    "report_apply",
    "report_prune",
    "report_receive",
    "revision_bump",
    "revision_get",
    "user_token_authenticate",
    "user_token_create",
    "user_token_revoke",
]
