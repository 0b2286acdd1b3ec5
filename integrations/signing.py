"""Webhook signatures: `X-Atlas-Signature: sha256=<hex HMAC-SHA256 of the body>`.

Pure functions, shared by the sender and by receivers' tests (a receiver written in another
language does the same three steps: HMAC the raw body, hex it, compare in constant time).
The body itself carries the delivery id and timestamp of the headers, so a receiver that
checks them against the signed body and rejects old timestamps is safe from replays.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Atlas-Signature"
DELIVERY_HEADER = "X-Atlas-Delivery"
TIMESTAMP_HEADER = "X-Atlas-Timestamp"
EVENT_HEADER = "X-Atlas-Event"


def signature(body: bytes, secret: str) -> str:
    """The header value for `body`: `sha256=` and the hex HMAC-SHA256 with `secret`."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signature_valid(body: bytes, secret: str, header: str) -> bool:
    """Whether `header` is the signature of `body` with `secret` (constant-time)."""
    return hmac.compare_digest(signature(body, secret).encode(), (header or "").encode())
