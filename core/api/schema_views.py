"""The OpenAPI schema and its browsable docs: for signed-in people unless made public.

`ATLAS_PUBLIC_API_SCHEMA=1` opens both to anonymous callers (a deployment that publishes its
API description); by default the schema answers 401 like the rest of the API, and the docs
page sends a browser to sign in like every other page. Every method answers so, OPTIONS and
HEAD too (not DRF's 200 with the view's metadata, nor a 405 that says the route exists). The
setting is read per request, so tests and a changed environment need no URL reload.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import APIException
from rest_framework.permissions import AllowAny, BasePermission, IsAuthenticated


def _schema_is_public() -> bool:
    return bool(getattr(settings, "ATLAS_PUBLIC_API_SCHEMA", False))


class SchemaView(SpectacularAPIView):
    """`/api/schema/`: 401 for anonymous callers unless ATLAS_PUBLIC_API_SCHEMA is on."""

    def get_permissions(self) -> list[BasePermission]:
        return [AllowAny()] if _schema_is_public() else [IsAuthenticated()]


class _SignInFirst(APIException):
    """An anonymous caller of the docs page: answered with the sign-in redirect."""


class DocsView(SpectacularSwaggerSplitView):
    """`/api/docs/`: Swagger UI, served locally, its start-up script a separate same-origin
    request (`?script`) so the Content-Security-Policy needs no inline script or style."""

    url_name = "api:schema"
    template_name = "api/docs.html"
    permission_classes = [AllowAny]  # an HTML page: anonymous browsers go to sign in instead

    def initial(self, request, *args, **kwargs) -> None:
        # Before the method is looked up: OPTIONS, HEAD and POST are sent to sign in as GET is.
        super().initial(request, *args, **kwargs)
        if not _schema_is_public() and not request.user.is_authenticated:
            raise _SignInFirst

    def handle_exception(self, exc):
        if isinstance(exc, _SignInFirst):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


api_docs = DocsView.as_view()
