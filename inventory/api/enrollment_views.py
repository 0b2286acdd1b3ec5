"""`POST agents/enroll/` (an enrollment token in, an agent token out) and staff's
`enrollment-tokens/` (create, list, revoke). Thin: parse, call one service, answer."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, permissions, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.permissions import staff_post_action

from .. import selectors
from ..services import (
    EnrollmentIdentity,
    EnrollmentRefused,
    agent_enroll,
    enrollment_token_create,
    enrollment_token_revoke,
)
from .authentication import KEYWORD, request_key
from .enrollment_serializers import (
    EnrolledSerializer,
    EnrollmentTokenCreatedSerializer,
    EnrollmentTokenCreateSerializer,
    EnrollmentTokenSerializer,
    EnrollRequestSerializer,
)


class EnrollView(APIView):
    """Enroll an agent: `Authorization: Token <enrollment token>` and its identity; 201 with
    its own agent token, bound to its server. The enrollment token is the only credential
    accepted here (an agent's or a person's token is 401), checked by the service itself so
    that the check, the count and the issue share one transaction."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    throttle_classes: list = []

    @extend_schema(
        request=EnrollRequestSerializer,
        responses={
            201: EnrolledSerializer,
            400: OpenApiResponse(description="field errors"),
            401: OpenApiResponse(description="unknown or forged enrollment token"),
            403: OpenApiResponse(description="spent, expired or revoked enrollment token"),
            409: OpenApiResponse(description="the server already has a live agent token"),
        },
        summary="Enroll an agent with an enrollment token",
    )
    def post(self, request):
        key = request_key(request)
        if key is None:
            raise exceptions.NotAuthenticated("Authorization: Token <enrollment token> needed.")
        serializer = EnrollRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            agent_key, server = agent_enroll(
                key=key,
                identity=EnrollmentIdentity.of(serializer.validated_data),
                remote_addr=request.META.get("REMOTE_ADDR") or None,
            )
        except EnrollmentRefused as exc:
            response = Response({"detail": exc.detail}, status=exc.status_code)
            if exc.status_code == status.HTTP_401_UNAUTHORIZED:
                response["WWW-Authenticate"] = KEYWORD
            return response
        return Response({"token": agent_key, "server": server.pk}, status=status.HTTP_201_CREATED)

    def get_authenticate_header(self, request) -> str:
        return KEYWORD


class EnrollmentTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Staff's enrollment tokens: created with the key in that one answer; listed with uses,
    expiry, state and who enrolled; `POST {id}/revoke/`."""

    permission_classes = [permissions.IsAuthenticated, permissions.IsAdminUser]
    serializer_class = EnrollmentTokenSerializer
    filter_backends: list = []

    def get_queryset(self):
        return selectors.enrollment_token_list()

    @extend_schema(
        request=EnrollmentTokenCreateSerializer, responses={201: EnrollmentTokenCreatedSerializer}
    )
    def create(self, request, *args, **kwargs):
        form = EnrollmentTokenCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        token, key = enrollment_token_create(
            name=data["name"],
            uses=data["uses"],
            expires_in=data["expires"],
            allow_reenroll=data["allow_reenroll"],
            created_by=request.user,
        )
        token = self.get_queryset().get(pk=token.pk)
        token.key = key  # this answer only
        return Response(EnrollmentTokenCreatedSerializer(token).data, status=201)

    @extend_schema(request=None, responses={200: EnrollmentTokenSerializer})
    @staff_post_action()
    def revoke(self, request, pk=None):
        token = self.get_object()
        enrollment_token_revoke(token=token)
        return Response(EnrollmentTokenSerializer(self.get_queryset().get(pk=token.pk)).data)
