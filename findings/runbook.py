"""The findings runbook (docs/findings.md) served as a page, one anchor per finding type.

The doc uses a small subset of Markdown (headings, paragraphs, `-` lists, **bold**, `code`);
`render_runbook` turns that subset into HTML after escaping every character of the source, so
the doc can never inject markup. Headings of the form `## <type>` get `id="<type>"`, which is
what `runbook_url(type)` links to.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_HEADING = re.compile(r"^(#{1,6}) (.+)$")
_TYPE = re.compile(r"^[a-z0-9_]+$")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def runbook_path() -> Path:
    return Path(settings.BASE_DIR) / "docs" / "findings.md"


def runbook_url(finding_type: str) -> str:
    """Where the runbook says what a finding of this type means and what to do."""
    return f"{reverse('runbook-findings')}#{finding_type}"


def _inline(text: str) -> str:
    # Escape first: the patterns below only ever wrap already-escaped text in fixed tags.
    text = escape(text)
    text = _CODE.sub(r"<code>\1</code>", text)
    return _BOLD.sub(r"<strong>\1</strong>", text)


def render_runbook(source: str) -> SafeString:
    """The Markdown subset of docs/findings.md as HTML (see the module docstring)."""
    html: list[str] = []
    for block in re.split(r"\n\s*\n", source.strip()):
        lines = block.splitlines()
        heading = _HEADING.match(lines[0]) if len(lines) == 1 else None
        if heading:
            level, title = len(heading.group(1)), heading.group(2).strip()
            anchor = f' id="{title}"' if _TYPE.match(title) else ""
            html.append(f"<h{level}{anchor}>{_inline(title)}</h{level}>")
        elif lines[0].startswith("- "):
            items: list[str] = []
            for line in lines:
                if line.startswith("- "):
                    items.append(line[2:].strip())
                elif items:
                    items[-1] += " " + line.strip()
            html.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
        else:
            html.append(f"<p>{_inline(' '.join(line.strip() for line in lines))}</p>")
    return mark_safe("\n".join(html))  # noqa: S308 (every piece of the source escaped above)


@lru_cache(maxsize=1)
def runbook_html() -> SafeString:
    return render_runbook(runbook_path().read_text(encoding="utf-8"))
