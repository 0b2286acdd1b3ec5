"""Agent-token authentication: only for the report endpoint, never for reading."""

from __future__ import annotations

from rest_framework import authentication, exceptions, permissions

from ..models import AgentToken
from ..services import agent_token_authenticate


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


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token header.") from None
        token = agent_token_authenticate(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked agent token.")
        return AgentPrincipal(token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


class IsAgent(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, AgentToken)
