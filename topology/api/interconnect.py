"""`GET /api/v1/topology/servers/{id}/`: one server's interconnect, as `nvidia-smi topo -m`."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from inventory.selectors import server_detail

from ..interconnect import server_interconnect


class DeviceSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="GPU<index> or the NIC's name, as in the matrix")
    kind = serializers.ChoiceField(choices=["gpu", "nic"])
    id = serializers.IntegerField()
    name = serializers.CharField()
    numa_node = serializers.IntegerField(allow_null=True)
    pci_bus_id = serializers.CharField()
    index = serializers.IntegerField(required=False)
    uuid = serializers.CharField(required=False)


@extend_schema_serializer(component_name="InterconnectLink")  # the inventory has a `Link`
class LinkSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    link_class = serializers.CharField(help_text="NV<n>, PIX, PXB, PHB, NODE or SYS")


class LegendSerializer(serializers.Serializer):
    link_class = serializers.CharField()
    description = serializers.CharField()


class InterconnectSerializer(serializers.Serializer):
    server = serializers.DictField()
    devices = DeviceSerializer(many=True)
    links = LinkSerializer(many=True)
    matrix = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(allow_blank=True)),
        help_text="rows and columns in device order; X on the diagonal, empty where unknown",
    )
    legend = LegendSerializer(many=True, help_text="the classes present, fastest first")
    nvswitch_count = serializers.IntegerField(allow_null=True)


class ServerInterconnectView(APIView):
    """A server's GPU/NIC interconnect matrix and links (lost GPUs left out)."""

    @extend_schema(responses={200: InterconnectSerializer}, summary="A server's interconnect")
    def get(self, request, pk: int):
        server = get_object_or_404(server_detail(), pk=pk)
        return Response(server_interconnect(server))
