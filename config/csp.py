"""The pages' Content-Security-Policy, and the few inline styles plotly.js needs from it.

Every script and stylesheet is a file from this server: templates carry no inline script,
style or event handler, and figure data is embedded with `json_script` (JSON, not script).
plotly.js still writes some styles inline; rather than `'unsafe-inline'` the policy allows
exactly those, by hash. They are fixed strings in the vendored bundle, none built from data:

- two `<style>` elements: an empty one that plotly fills through the CSSOM (`addStyleRule`,
  which CSP does not restrict) and MapLibre's stylesheet that the bundle adds on load;
- the `style` attributes of its pseudo-HTML in labels and hover text (`<b>` is
  `font-weight:bold`, ...) and the empty one it sets on colour-bar fills. Agent-supplied text
  is escaped before it reaches a label (core/figures.py `esc`), so no other value can appear.

A new plotly.js may change them: tests/browser/test_crawl.py then fails on the console's
"Applying inline style violates ..." message, which names the hash to put here.
"""

from __future__ import annotations

import base64
import hashlib

PLOTLY_STYLE_ELEMENT_HASHES = [
    "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",  # "" (addStyleRule fills it)
    "'sha256-ji27qzEtxXZW+7dun6UwjHXJ18e6WAin1VvNtkzIE/o='",  # MapLibre's CSS, plotly.js 4.1.1
]
# plotly.js's pseudo-HTML tags (svg_text_utils TAG_STYLES) and the colour-bar fills.
PLOTLY_STYLE_ATTRIBUTES = [
    "",
    "font-weight:bold",
    "font-style:italic",
    "font-style:italic;font-weight:bold",
    "font-size:70%",
    "text-decoration:underline",
    "text-decoration:line-through",
    "cursor:pointer",
]


def source_hash(text: str) -> str:
    """A CSP hash source (`'sha256-...'`) for an inline style or script of exactly `text`."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def content_security_policy(*, report_uri: str = "") -> dict:
    """django-csp's CONTENT_SECURITY_POLICY: same-origin everything, no inline script."""
    directives: dict[str, list[str]] = {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", *PLOTLY_STYLE_ELEMENT_HASHES],
        "style-src-attr": [
            "'unsafe-hashes'",  # only these exact attribute values, never arbitrary inline style
            *dict.fromkeys(source_hash(s) for s in PLOTLY_STYLE_ATTRIBUTES),
        ],
        # plotly's "download as PNG" draws the figure from data: and blob: images.
        "img-src": ["'self'", "data:", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    if report_uri:
        directives["report-uri"] = [report_uri]
    return {"DIRECTIVES": directives}
