"""The OpenAPI schema and its browsable docs: for signed-in people unless made public.

`ATLAS_PUBLIC_API_SCHEMA=1` opens both to anonymous callers (a deployment that publishes its
API description); by default the schema answers 401 like the rest of the API, and the docs
page sends a browser to sign in like every other page. The setting is read per request, so
tests and a changed environment need no URL reload.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated


def _schema_is_public() -> bool:
    return bool(getattr(settings, "ATLAS_PUBLIC_API_SCHEMA", False))


class SchemaView(SpectacularAPIView):
    """`/api/schema/`: 401 for anonymous callers unless ATLAS_PUBLIC_API_SCHEMA is on."""

    def get_permissions(self) -> list[BasePermission]:
        return [AllowAny()] if _schema_is_public() else [IsAuthenticated()]


class DocsView(SpectacularSwaggerSplitView):
    """`/api/docs/`: Swagger UI, served locally, its start-up script a separate same-origin
    request (`?script`) so the Content-Security-Policy needs no inline script or style."""

    url_name = "api:schema"
    template_name = "api/docs.html"
    permission_classes = [AllowAny]  # an HTML page: anonymous browsers go to sign in instead

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        if not _schema_is_public() and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return super().get(request, *args, **kwargs)


api_docs = DocsView.as_view()
