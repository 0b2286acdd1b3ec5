"""Topology API: the fleet figures, as rendered by Celery (`figures/`, `figures/<name>/`)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from ..models import RenderedFigure
from ..render import FLEET_FIGURES, fleet_figure_get, fleet_revision
from ..selectors import rendered_figure_index
from ..tasks import enqueue_fleet_render


def _figure_body(row: RenderedFigure, revision: str) -> dict:
    return {
        "name": row.name,
        "revision": row.revision,
        "current": row.revision == revision,
        "rendered_at": row.rendered_at,
        "duration_ms": row.duration_ms,
        "figure": row.figure,
    }


class FigureView(APIView):
    """A fleet figure as Plotly JSON (`figure`: `data` and `layout`), at once.

    200 with the last render; `current` is false while a newer one renders (ask again).
    202 `{"status": "pending"}` before the first render, which this request enqueues. In the
    embedded mode (no broker) the request renders the figure itself.
    """

    @extend_schema(
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="the figure"),
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="not rendered yet"),
            404: OpenApiResponse(description="no fleet figure of that name"),
        }
    )
    def get(self, request: Request, name: str) -> Response:
        if name not in FLEET_FIGURES:
            raise NotFound(f"no fleet figure {name!r}; try one of {', '.join(FLEET_FIGURES)}")
        revision = fleet_revision()
        row = fleet_figure_get(name=name)
        if row is None or row.revision != revision:
            enqueue_fleet_render([name])
            row = fleet_figure_get(name=name)  # rendered by now in the embedded mode
            revision = fleet_revision()
        if row is None:
            return Response({"name": name, "status": "pending"}, status=status.HTTP_202_ACCEPTED)
        return Response(_figure_body(row, revision))


class FigureListView(APIView):
    """The fleet figures, with the revision each was rendered at and whether it is current."""

    @extend_schema(operation_id="v1_figures_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        revision = fleet_revision()
        rendered = rendered_figure_index()
        figures = []
        for name in FLEET_FIGURES:
            row = rendered.get(name)
            figures.append(
                {
                    "name": name,
                    "url": reverse("api:figure-detail", args=[name], request=request),
                    "status": "pending" if row is None else "rendered",
                    "revision": row["revision"] if row else None,
                    "current": row is not None and row["revision"] == revision,
                    "rendered_at": row["rendered_at"] if row else None,
                    "duration_ms": row["duration_ms"] if row else None,
                }
            )
        return Response({"revision": revision, "figures": figures})
