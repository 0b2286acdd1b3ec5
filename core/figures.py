"""The drawing every figure shares: escaping, limits, ink, layout, titles, legends.

Pure and domain-free: topology, fabric and health build their Plotly figure dicts on these
helpers (data in, figure dict out), so every figure escapes names the same way, draws no more
than MAX_MARKS marks and looks like the others. Colours of states come from `core.palette`.
"""

from __future__ import annotations

import html
import re
from typing import Any

from core.palette import DARK_PALETTE, PALETTE, TONES

Figure = dict[str, Any]


MAX_MARKS = 2000


"""The most sectors, links, markers or bars any figure draws."""


INK, MUTED, LINE = "#1f2933", "#5f6b7a", "#d9e0e8"
PAPER = "#ffffff"
"""The light theme every figure is built in: text, secondary text, rules, background (the
`--ink`, `--muted`, `--line` and `--panel` of static/css/atlas.css)."""

DARK = {"paper": "#161c24", "ink": "#e6edf3", "muted": "#9aa7b4", "line": "#2d3744"}
"""The same four in dark mode (atlas.css's `prefers-color-scheme: dark` block)."""

MARK_CONTRAST = 3.0
"""How far a mark (a marker, bar, line) must stand from the dark paper (WCAG 1.4.11)."""


FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12}


# Categories (clusters, groups) never take a state colour (core.palette): green, amber and
# red mean ok, warning and critical on every page, so a cluster is never drawn "healthy".
GROUP_COLOURS = ("#2f6f9f", "#6a3d9a", "#00838f", "#8d6e63", "#455a64", "#5c6bc0", "#00695c")


def esc(value: object) -> str:
    """Text for plotly: `&`, `<` and `>` as entities, so a name never becomes markup.

    Quotes stay as they are: plotly.js decodes only a few named entities (not `&quot;`), and
    without a `<` no tag, hence no attribute, can start.
    """
    return html.escape("" if value is None else str(value), quote=False)


def plural(n: int | float, word: str, plural: str = "") -> str:
    """`1 server`, `2,000 servers` (or the given plural)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {plural or word + 's'}"


def natural_key(value: str) -> tuple:
    """rack-2 before rack-10."""
    return tuple(int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", value))


def base_layout(**extra: Any) -> dict[str, Any]:
    """The layout every figure starts from; `extra` keys replace or add to it."""
    base: dict[str, Any] = {
        "font": {**FONT, "color": INK},
        "paper_bgcolor": PAPER,
        "plot_bgcolor": PAPER,
        "margin": {"l": 10, "r": 10, "t": 30, "b": 10},
        "hoverlabel": {"align": "left"},
        "hovermode": "closest",
    }
    base.update(extra)
    return base


def figure_title(text: str) -> dict[str, Any]:
    """A figure's title, small and left-aligned (the text is escaped by the caller)."""
    return {"text": text, "x": 0, "xanchor": "left", "font": {"size": 13, "color": MUTED}}


def empty_figure(message: str, **meta: Any) -> Figure:
    """A figure that says why there is nothing to draw (instead of empty axes)."""
    return {
        "data": [],
        "layout": base_layout(
            height=160,
            xaxis={"visible": False},
            yaxis={"visible": False},
            annotations=[
                {
                    "text": message,
                    "showarrow": False,
                    "x": 0.5,
                    "y": 0.5,
                    "xref": "paper",
                    "yref": "paper",
                    "font": {"color": MUTED, "size": 13},
                }
            ],
            meta={"empty": True, "aggregated": False, **meta},
        ),
    }


def hidden_axes(**extra: Any) -> dict[str, Any]:
    """An axis that positions marks but shows nothing and does not zoom."""
    return {
        "visible": False,
        "showgrid": False,
        "zeroline": False,
        "fixedrange": True,
        **extra,
    }


def legend_swatch(name: str, colour: str, symbol: str = "square", group: str = "") -> dict:
    """A legend entry without data: heatmaps and Sankeys have no legend of their own."""
    return {
        "type": "scatter",
        "x": [None],
        "y": [None],
        "mode": "markers",
        "marker": {"symbol": symbol, "size": 12, "color": colour, "line": {"width": 0}},
        "name": name,
        "legendgroup": group or name,
        "showlegend": True,
        "hoverinfo": "skip",
    }


def bottom_legend(title: str = "", **extra: Any) -> dict[str, Any]:
    """A legend under the plot, one entry a line, that does not hide traces on click."""
    legend: dict[str, Any] = {
        "orientation": "v",
        "x": 0,
        "xanchor": "left",
        "y": -0.02,
        "yanchor": "top",
        "itemclick": False,
        "itemdoubleclick": False,
        "font": {"size": 12},
    }
    if title:
        legend["title"] = {"text": title}
    legend.update(extra)
    return legend


def side_legend(title: str = "") -> dict[str, Any]:
    """`bottom_legend`, to the right of the plot."""
    return bottom_legend(title, x=1.02, y=1, yanchor="top")


def figure_themes() -> dict[str, Any]:
    """How static/js/figures.js re-themes a figure built in the light theme, by scheme.

    Figures are built once, light (they are stored per fleet revision and shared by every
    viewer); the loader swaps colours at draw time when the browser prefers dark, by role:
    `paper` for backgrounds and for marks drawn in the paper colour (sector and slice
    separators); `text` for font colours (any other text colour, white on a mark, stays);
    `lines` for grid, axis and rule colours; `marks` for state colours, each tone's light
    `solid` to its dark one. Any other mark closer to the dark paper than `mark_contrast` is
    lightened until it is not, so a navy switch or a dark-green NVLink stays visible; `modebar`
    is the mode bar's own colours.
    """
    return {
        "dark": {
            "paper": DARK["paper"],
            "text": {INK: DARK["ink"], MUTED: DARK["muted"]},
            "lines": {LINE: DARK["line"]},
            "marks": {
                PALETTE[tone]["solid"]: DARK_PALETTE[tone]["solid"]
                for tone in TONES
                if PALETTE[tone]["solid"] != DARK_PALETTE[tone]["solid"]
            },
            "mark_contrast": MARK_CONTRAST,
            "modebar": {
                "bgcolor": "rgba(22,28,36,0.6)",
                "color": DARK["muted"],
                "activecolor": DARK["ink"],
            },
        }
    }
