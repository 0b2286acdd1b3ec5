"""OpenAPI schema generation: every operation documents its error answers.

Clients (and the fuzzing tier) rely on the schema naming every status an endpoint can give:
401 without credentials, 403 without permission, 404 for an unknown id or page, 400 for a
bad parameter or body, 415 for a body of another media type.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema

from .errors import ErrorSerializer

ERROR_CODES = ("400", "401", "403", "404")
BODY_ERROR_CODES = ("415",)


class AtlasAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        codes: tuple[str, ...] = ERROR_CODES
        if self.method in ("POST", "PUT", "PATCH"):
            codes = (*codes, *BODY_ERROR_CODES)
        for code in codes:
            if code not in responses:
                error = self._get_response_for_code(ErrorSerializer, code, None, direction)
                responses[code] = error
        return responses
