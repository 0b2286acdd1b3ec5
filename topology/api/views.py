"""Topology API: placement, failure domains, the capacity planner. Thin: parse, call, answer."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from health.selectors import needing_action_share

from ..capacity import CapacityRequestError, capacity_compare
from ..failure_domains import FailureDomainError, failure_domain, failure_domain_ranking
from ..placement import PlacementRequestError, placement_find
from .serializers import (
    CapacityQuerySerializer,
    CapacitySerializer,
    FailureDomainQuerySerializer,
    FailureDomainSerializer,
    PlacementQuerySerializer,
    PlacementResultSerializer,
    RankingQuerySerializer,
    RankingSerializer,
)


def _invalid(exc: PlacementRequestError | FailureDomainError | CapacityRequestError) -> None:
    raise serializers.ValidationError({exc.field: [str(exc)]})


class PlacementView(APIView):
    """Where a job fits now: Kubernetes one pod on one node; Slurm nodes x GPUs, or spread."""

    @extend_schema(
        parameters=[PlacementQuerySerializer],
        responses={200: PlacementResultSerializer},
        summary="Place a GPU job on the nodes as they are now",
    )
    def get(self, request: Request) -> Response:
        query = PlacementQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            result = placement_find(**query.to_service())
        except PlacementRequestError as exc:
            _invalid(exc)
        return Response(PlacementResultSerializer(result).data)


class CapacityView(APIView):
    """Compare layouts of N GPUs: 10 x 8 vs 20 x 4 vs 80 x 1."""

    @extend_schema(
        parameters=[CapacityQuerySerializer],
        responses={200: CapacitySerializer},
        summary="Capacity planner: the same GPUs in dense or sparse servers",
    )
    def get(self, request: Request) -> Response:
        query = CapacityQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            result = capacity_compare(
                gpus=data["gpus"],
                per_server=data["per_server"],
                nvlink=data["nvlink"],
                model=data.get("model"),
                action_share=needing_action_share(),
            )
        except CapacityRequestError as exc:
            _invalid(exc)
        return Response(CapacitySerializer(result).data)


class FailureDomainView(APIView):
    """What is lost if a server, a rack or a switch fails, and what still fits afterwards."""

    @extend_schema(
        parameters=[FailureDomainQuerySerializer],
        responses={200: FailureDomainSerializer},
        summary="Failure domain of a server, rack or switch",
    )
    def get(self, request: Request) -> Response:
        query = FailureDomainQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            result = failure_domain(
                server=data.get("server"), rack=data.get("rack"), switch=data.get("switch")
            )
        except FailureDomainError as exc:
            _invalid(exc)
        return Response(FailureDomainSerializer(result).data)


class FailureDomainRankingView(APIView):
    """Racks or servers ranked by the GPUs they would take down."""

    @extend_schema(
        parameters=[RankingQuerySerializer],
        responses={200: RankingSerializer},
        summary="Fleet ranking of failure domains",
    )
    def get(self, request: Request) -> Response:
        query = RankingQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        result = failure_domain_ranking(**query.validated_data)
        return Response(RankingSerializer(result).data)
