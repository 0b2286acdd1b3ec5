"""Inventory API: agent reports in, servers/GPUs/MIG devices out. Thin: parse, call, answer."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import exceptions, mixins, permissions, serializers, status, viewsets
from rest_framework.filters import OrderingFilter
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.body_limit import BodyLimit
from core.api.permissions import IsStaffOrReadOnly

from .. import selectors
from ..filters import GpuFilter, MigDeviceFilter, ServerFilter
from ..services import (
    AgentTokenState,
    DigestRejected,
    ReportRejected,
    agent_token_state,
    heartbeat_by_digest,
    heartbeat_digest,
    heartbeat_seen,
    parse_digest,
    report_receive,
    revision_bump,
)
from ..tasks import enqueue_report
from .authentication import UNKNOWN_AGENT_TOKEN, AgentTokenAuthentication, IsAgent, request_key
from .serializers import (
    GpuListSerializer,
    MigDeviceListSerializer,
    ReportAcceptedSerializer,
    ReportRejectedSerializer,
    ServerDetailSerializer,
    ServerSerializer,
)

DIGEST_META = "HTTP_X_ATLAS_REPORT_DIGEST"  # agent.schema.DIGEST_HEADER, as WSGI names it
SEND_REPORT = {"detail": "the report changed: send it in full", "status": "send-report"}


class ReportView(APIView):
    """POST an agent report (JSON, `Authorization: Token <agent token>`).

    Or only its digest: `X-Atlas-Report-Digest: sha256:<hex>` with an empty body is answered
    200 "unchanged" when it equals the digest of the last report applied for the token's
    server, else 409 "send-report" (then the agent posts the report itself). Heartbeats are
    answered before they get here, by AgentHeartbeatMiddleware (`heartbeat_answer`); this
    view answers them the same way when that middleware is not installed.
    """

    body_limit = BodyLimit("ATLAS_REPORT_MAX_BYTES", "report too large")

    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [IsAgent]
    throttle_classes: list = []

    @extend_schema(
        request={"application/json": {"type": "object", "description": "docs/report.md"}},
        parameters=[
            OpenApiParameter(
                "X-Atlas-Report-Digest",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                description="`sha256:<hex>` of the report's facts (docs/report.md); with an "
                "empty body: 200 when unchanged, 409 when the report must be sent",
            )
        ],
        responses={
            200: ReportAcceptedSerializer,
            202: ReportAcceptedSerializer,
            400: ReportRejectedSerializer,
            403: ReportRejectedSerializer,
            409: inline_serializer(
                "ReportChanged",
                {"detail": serializers.CharField(), "status": serializers.CharField()},
            ),
            413: ReportRejectedSerializer,
        },
        summary="Receive an agent report",
    )
    def post(self, request):
        digest = request.META.get(DIGEST_META)
        if digest is not None:
            answer = _digest_answer(AgentTokenState.of(request.auth), digest, request.META)
            if answer is not None:
                return Response(answer[1], status=answer[0])
        try:  # a body over ATLAS_REPORT_MAX_BYTES never gets here (core/api/body_limit.py)
            result = report_receive(token=request.auth, body=request.body, enqueue=enqueue_report)
        except ReportRejected as exc:
            return _rejected(exc)
        return Response(_accepted(result), status=status.HTTP_202_ACCEPTED)


def heartbeat_answer(request: HttpRequest) -> HttpResponse | None:
    """The answer to an agent's heartbeat (by digest, or a report with unchanged facts) in
    one statement, or from the web process's memory with none (`heartbeat_seen`), in plain
    Django; None for anything else, which
    ReportView then handles with the endpoint's full contract. Called by
    AgentHeartbeatMiddleware, ahead of the middleware an agent does not need.

    A miss pays a second query, the token's state, to answer as before: 401 for an unknown or
    revoked key (DRF's answer, so the view need not look it up again), 400 for a malformed
    digest, 409 for a changed one; a changed report body goes on to the view."""
    try:
        key = request_key(request)
    except exceptions.AuthenticationFailed:
        return None
    if key is None:
        return None
    header = request.META.get(DIGEST_META)
    digest = _parsed_or_none(header) if header is not None else _body_digest(request)
    if digest is not None:
        result = heartbeat_seen(key=key, digest=digest)
        if result is not None:
            code = status.HTTP_200_OK if header is not None else status.HTTP_202_ACCEPTED
            return _json(code, _accepted(result))
    state = agent_token_state(key)
    if state is None:
        response = _json(status.HTTP_401_UNAUTHORIZED, {"detail": UNKNOWN_AGENT_TOKEN})
        response["WWW-Authenticate"] = AgentTokenAuthentication.keyword
        return response
    if header is not None:
        answer = _digest_answer(state, header, request.META)
        return None if answer is None else _json(*answer)
    result = None if digest is None else heartbeat_by_digest(state=state, digest=digest)
    return None if result is None else _json(status.HTTP_202_ACCEPTED, _accepted(result))


def _parsed_or_none(header: str) -> str | None:
    try:
        return parse_digest(header)
    except DigestRejected:
        return None  # answered 400 once the token is known (an unknown one is 401 first)


def _body_digest(request: HttpRequest) -> str | None:
    """The digest of a body that may be an unchanged report; None for one with no length
    (chunked) or over the limit, which ReportView reads (or BodyLimitMiddleware refuses)."""
    length = request.META.get("CONTENT_LENGTH") or ""
    if not length.isdigit() or int(length) > settings.ATLAS_REPORT_MAX_BYTES:
        return None
    return heartbeat_digest(request.body)


def _digest_answer(state: AgentTokenState, header: str, meta: dict) -> tuple[int, dict] | None:
    """(status, body) for a request naming its digest; None when a report body came with it
    and the digest differs: that report is then received as any other."""
    try:
        digest = parse_digest(header)
    except DigestRejected as exc:
        errors = {"X-Atlas-Report-Digest": [str(exc)]}
        return status.HTTP_400_BAD_REQUEST, {"detail": "malformed report", "errors": errors}
    result = heartbeat_by_digest(state=state, digest=digest)
    if result is not None:
        return status.HTTP_200_OK, _accepted(result)
    if (meta.get("CONTENT_LENGTH") or "0") == "0":
        return status.HTTP_409_CONFLICT, SEND_REPORT
    return None


def _accepted(result) -> dict:
    return {"id": result.report_id, "status": result.status, "server": result.server_id}


def _json(code: int, data: dict) -> HttpResponse:
    """What DRF's JSONRenderer would write (compact), without DRF; `data` kept on the
    response as DRF's Response keeps it (the /metrics answer counter reads its status).

    With its Content-Length, which CommonMiddleware adds to the view's answers but a heartbeat
    answered ahead of it would go without: gunicorn then sends it chunked, a third write per
    answer (headers, the chunk, the last chunk) and more for the agent to parse."""
    body = json.dumps(data, separators=(",", ":")).encode()
    response = HttpResponse(body, status=code, content_type="application/json")
    response["Content-Length"] = str(len(body))
    response.data = data  # type: ignore[attr-defined]
    return response


def _rejected(exc: ReportRejected) -> Response:
    detail = {400: "malformed report", 403: "forbidden", 413: "report too large"}
    return Response(
        {"detail": detail.get(exc.status_code, "rejected"), "errors": exc.errors},
        status=exc.status_code,
    )


class ServerViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet,
):
    """Servers: the physical layer. PATCH sets rack, rack_position and physical_host."""

    permission_classes = [permissions.IsAuthenticated, IsStaffOrReadOnly]
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = ServerFilter
    ordering_fields = ["hostname", "last_seen", "gpu_count", "mig_device_count", "rack", "id"]
    ordering = ["hostname", "id"]
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self):
        if self.action == "retrieve":
            return selectors.server_detail()
        return selectors.server_list()

    def get_serializer_class(self):
        return ServerDetailSerializer if self.action == "retrieve" else ServerSerializer

    def perform_update(self, serializer) -> None:
        serializer.save()
        revision_bump(name="inventory")  # racks and VM hosts change figures and failure domains

    def update(self, request, *args, **kwargs):
        super().update(request, *args, **kwargs)
        return Response(ServerSerializer(selectors.server_list().get(pk=kwargs["pk"])).data)


class GpuViewSet(viewsets.ReadOnlyModelViewSet):
    """GPUs: resources inside servers (never nodes). `?server=ID`, `?model=`, `?status=`."""

    serializer_class = GpuListSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = GpuFilter
    ordering_fields = ["id", "index", "name", "memory_total_bytes"]
    ordering = ["server_id", "index"]

    def get_queryset(self):
        return selectors.gpu_list()


class MigDeviceViewSet(viewsets.ReadOnlyModelViewSet):
    """MIG devices: slices of one GPU (still not nodes). `?server=`, `?gpu=`, `?profile=`."""

    serializer_class = MigDeviceListSerializer
    filter_backends = [DjangoFilterBackend, OrderingFilter]
    filterset_class = MigDeviceFilter
    ordering_fields = ["id", "profile", "memory_bytes"]
    ordering = ["gpu_id", "gpu_instance_id", "compute_instance_id"]

    def get_queryset(self):
        return selectors.mig_device_list()
