"""Adapters bind to servers by the GUIDs their agents reported, before any name: an adapter
whose node description was never set binds all the same; a GUID two servers claim binds
neither."""

from __future__ import annotations

import json

import pytest

from fabric import binding
from fabric.models import Adapter, Fabric
from fabric.services import agent_guid_servers, fabric_rebind, fabric_snapshot_ingest
from inventory.models import Nic, Server
from inventory.services import agent_token_create, report_apply, report_receive
from tests.reports import make_report

UNSET = "e09d730300858f00"  # "MT4129 ConnectX7   Mellanox Technologies": no host name at all
NAMED = "e09d730300859464"  # "b08-p1-dgx-08-c01 HCA-5"


def test_the_guid_index_drops_a_guid_two_servers_report():
    index = binding.server_guid_index(
        [(1, "aa", ["ab"]), (2, "bb", ["bc"]), (3, "cc", ["ab"]), (1, "", ["AD"])]
    )
    assert index == {"aa": 1, "bb": 2, "bc": 2, "cc": 3, "ad": 1}


@pytest.mark.django_db
def test_an_adapter_with_no_description_binds_by_the_guid_its_agent_reported(superpod):
    report = make_report("gpu-0042", gpus=8, nics=2)
    report["nics"][0].update(kind="infiniband", node_guid=UNSET, port_guids=[UNSET])
    token = agent_token_create(name="t")[0]
    report_apply(report_id=report_receive(token=token, body=json.dumps(report).encode()).report_id)
    server = Server.objects.get(hostname="gpu-0042")

    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    adapter = Adapter.objects.get(guid=UNSET)
    assert (adapter.server, adapter.binding_method) == (server, "guid")
    assert agent_guid_servers(Fabric.objects.get()) == {UNSET: server.pk}


@pytest.mark.django_db
def test_a_guid_beats_the_description_and_a_clash_falls_back_to_it(superpod):
    described = Server.objects.create(identity="hostname:b08", hostname="b08-p1-dgx-08-c01")
    other = Server.objects.create(identity="hostname:x", hostname="x-01")
    Nic.objects.create(server=other, name="mlx5_0", node_guid=NAMED, port_guids=[NAMED])
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    adapter = Adapter.objects.get(guid=NAMED)
    assert (adapter.server, adapter.binding_method) == (other, "guid")

    # the described server reports the same GUID too: neither claim binds, the name does
    Nic.objects.create(server=described, name="mlx5_5", node_guid=NAMED)
    fabric_rebind(fabric=Fabric.objects.get())
    adapter.refresh_from_db()
    assert (adapter.server, adapter.binding_method) == (described, "description")
