"""The API's JSON parser: the strict decoder every JSON body goes through (settings)."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.safe_input import InputRejected, json_loads


class StrictJSONParser(JSONParser):
    """RFC 8259 JSON, nesting bounded, no NUL or lone surrogate: a 400 naming the field."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read() if stream is not None else b""
        try:
            return json_loads(data)
        except InputRejected as exc:
            raise ParseError({"detail": "malformed JSON", "errors": exc.errors}) from None
