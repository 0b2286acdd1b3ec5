"""Token authentication: agent tokens only for the report endpoint, people's for the rest.

Both kinds arrive as `Authorization: Token <key>` and are checked the same way (a SHA-256
lookup, inventory/services/tokens.py); each endpoint accepts one kind, so an agent's key
never reads the inventory and a person's key never posts a report: either gets 401.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from ..models import AgentToken
from ..services import agent_token_authenticate, user_token_authenticate


class AgentPrincipal:
    """The request.user of an agent: authenticated, but no person and no permissions."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, token: AgentToken) -> None:
        self.token = token

    def __str__(self) -> str:
        return f"agent {self.token.prefix}…"


KEYWORD = "Token"


def request_key(request) -> str | None:
    """The key of `Authorization: Token <key>` (a DRF or a plain Django request); None
    without such a header; AuthenticationFailed for a malformed one."""
    header = authentication.get_authorization_header(request).split()
    if not header or header[0].lower() != KEYWORD.lower().encode():
        return None
    if len(header) != 2:
        raise exceptions.AuthenticationFailed("Invalid token header.")
    try:
        return header[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Invalid token header.") from None


class _KeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>`: the header parsed once, the key checked by a subclass."""

    keyword = KEYWORD

    def authenticate(self, request):
        key = request_key(request)
        return None if key is None else self.authenticate_key(key)

    def authenticate_key(self, key: str):
        raise NotImplementedError

    def authenticate_header(self, request) -> str:
        return self.keyword


UNKNOWN_AGENT_TOKEN = "Unknown or revoked agent token."


class AgentTokenAuthentication(_KeyAuthentication):
    def authenticate_key(self, key: str):
        token = agent_token_authenticate(key)
        if token is None:
            raise exceptions.AuthenticationFailed(UNKNOWN_AGENT_TOKEN)
        return AgentPrincipal(token), token


class UserTokenAuthentication(_KeyAuthentication):
    """A person's API token (`cau_...`, or a DRF key issued before tokens were hashed)."""

    def authenticate_key(self, key: str):
        token = user_token_authenticate(key)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        return token.user, token


class IsAgent(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, AgentToken)


class _TokenScheme(OpenApiAuthenticationExtension):
    """Both token kinds in the OpenAPI schema: `Authorization: Token <key>`."""

    priority = 1

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'Token-based authentication with required prefix "Token"',
        }


class AgentTokenScheme(_TokenScheme):
    target_class = "inventory.api.authentication.AgentTokenAuthentication"
    name = "agentToken"


class UserTokenScheme(_TokenScheme):
    target_class = "inventory.api.authentication.UserTokenAuthentication"
    name = "tokenAuth"
