"""Failure domains: what a server, rack or switch takes down; the fleet ranking; CSV locations."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.reconcile import reconcile_all
from clusters.services import snapshot_ingest
from inventory.models import Nic, Server
from inventory.services.locations import locations_import, locations_parse
from placement.failure_domains import (
    FailureDomainError,
    failure_domain,
    failure_domain_choices,
    failure_domain_ranking,
    server_resolve,
)
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text
from tests.reports import apply_reports, make_report

from .fleets import slurm_fleet

pytestmark = pytest.mark.django_db

HOST_UUID = "11111111-1111-4111-8111-111111111111"
VM_UUIDS = ["22222222-2222-4222-8222-222222222221", "22222222-2222-4222-8222-222222222222"]


def vm_fleet() -> dict[str, Server]:
    """A KVM host with two 4-GPU VMs, each a Kubernetes node, beside an 8-GPU server."""
    servers = apply_reports(
        make_report(
            "kvm-01",
            gpus=0,
            system_uuid=HOST_UUID,
            guests=[{"uuid": u, "name": f"vm{i}"} for i, u in enumerate(VM_UUIDS)],
        ),
        *(
            make_report(
                f"vm{i}",
                gpus=4,
                system_uuid=u,
                virtualization={"is_virtual": True, "hypervisor": "kvm"},
            )
            for i, u in enumerate(VM_UUIDS)
        ),
        make_report("dgx-01"),
    )
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(
            *(k8s_node(f"vm{i}", system_uuid=u, gpus=4) for i, u in enumerate(VM_UUIDS)),
            k8s_node("dgx-01", system_uuid=servers["dgx-01"].system_uuid),
        ),
    )
    reconcile_all()
    return {s.hostname: s for s in Server.objects.all()}


def test_a_vm_host_failure_takes_both_vm_nodes():
    servers = vm_fleet()
    domain = failure_domain(server=servers["kvm-01"].pk)
    assert domain["target"] == {"kind": "server", "name": "kvm-01", "id": servers["kvm-01"].pk}
    assert domain["servers"] == 3
    assert sorted(n["name"] for n in domain["node_list"]) == ["vm0", "vm1"]
    assert domain["nodes"] == 2 and domain["gpus"] == 8
    (prod,) = domain["clusters"]
    assert (prod["gpu_capacity"], prod["gpu_capacity_lost"], prod["share_lost"]) == (16, 8, 0.5)
    assert prod["largest_node_free_before"] == 8 and prod["largest_node_free_after"] == 8
    assert (prod["free_gpus_before"], prod["free_gpus_after"]) == (16, 8)
    vm_only = failure_domain(server=servers["vm0"].pk)
    assert vm_only["servers"] == 1 and vm_only["nodes"] == 1 and vm_only["gpus"] == 4


def test_a_rack_failure_counts_the_sum_of_its_servers():
    names = [f"gpu{i:03d}" for i in range(4)]
    reports = [make_report(n, mig_gpus={0: ["3g.40gb", "3g.40gb"]}) for n in names]
    slurm_fleet(names, reports=reports)
    Server.objects.filter(hostname__in=names[:3]).update(rack="r1")
    rack = failure_domain(rack="r1")
    parts = [failure_domain(server=s.pk) for s in Server.objects.filter(rack="r1")]
    for key in ("servers", "nodes", "gpus", "mig_devices"):
        assert rack[key] == sum(p[key] for p in parts)
    assert (rack["servers"], rack["nodes"], rack["gpus"], rack["mig_devices"]) == (3, 3, 24, 6)
    assert {s["hostname"] for s in rack["server_list"]} == set(names[:3])
    assert len(rack["gpu_list"]) == 24 and len(rack["mig_device_list"]) == 6
    (partition,) = rack["partitions"]
    assert partition["partition"] == "gpu" and partition["share_lost"] == 0.75
    # the server left has GPU 0 in MIG mode: 7 whole GPUs, whatever the GRES says
    assert rack["clusters"][0]["largest_node_free_after"] == 7


def test_a_switch_failure_loses_single_homed_servers_and_degrades_dual_homed():
    apply_reports(make_report("a"), make_report("b"), make_report("c"))
    Nic.objects.filter(server__hostname="a").update(switch="leaf-1")
    Nic.objects.filter(server__hostname="b", name="mlx5_0").update(switch="leaf-1")
    Nic.objects.filter(server__hostname="b", name="mlx5_1").update(switch="leaf-2")
    Nic.objects.filter(server__hostname="c").update(switch="leaf-2")
    domain = failure_domain(switch="leaf-1")
    assert [s["hostname"] for s in domain["server_list"]] == ["a"]
    assert [(d["hostname"], d["other_switches"]) for d in domain["degraded_servers"]] == [
        ("b", ["leaf-2"])
    ]
    assert failure_domain(switch="nowhere")["servers"] == 0


def test_capacity_lost_per_cluster_in_both_schedulers():
    report = make_report("dgx-01")
    servers = apply_reports(report, make_report("dgx-02"))
    snapshot_ingest(
        cluster_name="prod",
        raw=k8s_node_list(k8s_node("dgx-01", system_uuid=report["host"]["system_uuid"])),
    )
    snapshot_ingest(
        cluster_name="hpc", raw=scontrol_text(scontrol_node("dgx-01"), scontrol_node("dgx-02"))
    )
    reconcile_all()
    domain = failure_domain(server=servers["dgx-01"].pk)
    assert domain["nodes"] == 2  # the same server is a node in both clusters
    by_cluster = {c["cluster"]: c for c in domain["clusters"]}
    assert by_cluster["prod"]["share_lost"] == 1.0
    assert by_cluster["prod"]["largest_node_free_after"] == 0
    assert by_cluster["hpc"]["share_lost"] == 0.5


def test_a_failure_domain_names_exactly_one_thing():
    with pytest.raises(FailureDomainError):
        failure_domain()
    with pytest.raises(FailureDomainError):
        failure_domain(server=1, rack="r1")
    apply_reports(make_report("dgx-01"))
    assert server_resolve("DGX-01") == Server.objects.get().pk
    with pytest.raises(FailureDomainError):
        server_resolve("nope")


def test_ranking_puts_dense_racks_and_hosts_first_in_fixed_queries():
    vm_fleet()
    apply_reports(make_report("small-01", gpus=2))
    Server.objects.filter(hostname__in=["kvm-01", "small-01"]).update(rack="r-vm")
    Server.objects.filter(hostname="dgx-01").update(rack="r-dgx")
    with CaptureQueriesContext(connection) as queries:
        racks = failure_domain_ranking(by="rack")
    assert len(queries) == 5  # servers, GPU, MIG and node counts, the running GPUs
    assert [(i["name"], i["gpus"]) for i in racks["items"]] == [("r-vm", 10), ("r-dgx", 8)]
    assert racks["items"][0]["servers"] == 4  # the host, its two VMs, the small server
    assert racks["fleet_gpus"] == 18 and racks["unracked_servers"] == 0
    servers = failure_domain_ranking(by="server")
    assert [(i["name"], i["gpus"], i["nodes"]) for i in servers["items"][:2]] == [
        ("kvm-01", 8, 2),  # as many GPUs as dgx-01, and more nodes
        ("dgx-01", 8, 1),
    ]
    assert "vm0" not in {i["name"] for i in servers["items"]}  # VMs count with their host
    with pytest.raises(FailureDomainError):
        failure_domain_ranking(by="row")


def test_failure_domain_queries_do_not_grow_with_the_fleet():
    def count(n: int, prefix: str) -> int:
        names = [f"{prefix}{i:02d}" for i in range(n)]
        slurm_fleet(names, cluster=prefix)
        Server.objects.filter(hostname__in=names).update(rack=f"{prefix}-rack")
        with CaptureQueriesContext(connection) as queries:
            failure_domain(rack=f"{prefix}-rack")
        return len(queries)

    assert count(2, "few") == count(10, "many")


# Locations from CSV ---------------------------------------------------------------------


def test_import_locations_sets_racks_positions_and_switch_ports(tmp_path):
    apply_reports(make_report("dgx-01"), make_report("dgx-02", fqdn="dgx-02.example.org"))
    csv = tmp_path / "locations.csv"
    csv.write_text(
        "hostname,rack,position,nic,switch,port\n"
        "DGX-01,r1,10,mlx5_0,leaf-1,Ethernet1/1\n"
        "dgx-01,r1,10,mlx5_1,leaf-2,Ethernet1/1\n"
        "dgx-02.example.org,r2,,,,\n"
    )
    call_command("import_locations", str(csv))
    one, two = Server.objects.order_by("hostname")
    assert (one.rack, one.rack_position, two.rack, two.rack_position) == ("r1", 10, "r2", None)
    switches = dict(one.nics.values_list("name", "switch"))
    assert switches == {"mlx5_0": "leaf-1", "mlx5_1": "leaf-2"}
    assert failure_domain(rack="r1")["servers"] == 1
    assert failure_domain(switch="leaf-1")["degraded_servers"][0]["hostname"] == "dgx-01"


def test_import_locations_writes_nothing_when_a_row_is_wrong(tmp_path):
    apply_reports(make_report("dgx-01"))
    csv = tmp_path / "bad.csv"
    csv.write_text("dgx-01,r1,10\nghost,r1,11\ndgx-01,r1,U12\n")
    with pytest.raises(CommandError, match="2 row"):
        call_command("import_locations", str(csv))
    assert Server.objects.get().rack == ""
    result = locations_import(rows=locations_parse(csv.read_text()), skip_errors=True)
    assert result.applied and result.servers_updated == 1
    assert any("no server named 'ghost'" in e for e in result.errors)
    assert Server.objects.get().rack == "r1"


def test_the_form_choices_cost_two_queries(django_assert_num_queries):
    slurm_fleet(["dgx-01", "dgx-02"])
    Server.objects.filter(hostname="dgx-01").update(rack="r1")
    Nic.objects.filter(server__hostname="dgx-02").update(switch="leaf-1")
    with django_assert_num_queries(2):
        assert failure_domain_choices() == {"racks": ["r1"], "switches": ["leaf-1"]}


# -- the discovered fabric: pure arithmetic ------------------------------------------------


def test_a_leaf_takes_rail_k_of_each_server_under_it_and_the_servers_stay_up():
    from placement.failure_domains import fabric_loss_words, leaf_loss

    cables = {
        1: [(10, 400.0, 1), (20, 400.0, 2)],  # two rails: leaf 10 takes rail 1
        2: [(10, 400.0, 1), (20, 400.0, 2)],
        3: [(10, 200.0, 1)],  # single-homed on leaf 10: cut off
        4: [(30, 400.0, 1), (20, 400.0, 2)],  # not under leaf 10
    }
    loss = leaf_loss(cables, 10)
    assert loss.cut == {3}
    assert loss.degraded == {1: (400.0, 800.0, [1]), 2: (400.0, 800.0, [1])}
    assert loss.gbps_lost == 800.0
    words = fabric_loss_words("leaf-1", 1, loss, None)
    assert "rail 1 of 2 server(s)" in words and "800 Gb/s" in words and "stay up" in words
    assert "1 server(s) have no other fabric cable" in words


def test_a_spine_takes_its_share_of_the_bisection_and_cuts_off_leaves_it_alone_serves():
    from placement.failure_domains import fabric_loss_words, spine_loss

    tiers = {1: 1, 2: 1, 3: 1, 10: 2, 11: 2, 12: 2, 13: 2}
    trunks = [(1, s, 400.0) for s in (10, 11, 12, 13)] + [(2, s, 400.0) for s in (10, 11, 12, 13)]
    trunks.append((3, 10, 400.0))  # leaf 3 hangs off spine 10 alone
    loss = spine_loss(trunks, tiers, 10)
    assert loss.gbps_lost == 1200.0 and loss.tier_gbps == 3600.0
    assert loss.share == pytest.approx(0.3333)
    assert loss.isolated_switches == [3]
    words = fabric_loss_words("spine-1", 2, None, loss)
    assert (
        "33.3% of the leaf-to-spine (bisection) bandwidth" in words
        and "no server goes down" in words
    )
    assert "1 switch(es) below have no other uplink" in words
    assert spine_loss(trunks, tiers, 11).isolated_switches == []


def test_a_fabric_leaf_and_spine_through_the_api(api):
    from fabric.models import Switch
    from fabric.services import fabric_rebind, fabric_snapshot_ingest
    from fabric.synthetic import synthetic_fabric

    built = synthetic_fabric(servers=4, rails=2, servers_per_leaf=2)
    fabric_snapshot_ingest(fabric_name="ib", raw=built.text)
    apply_reports(*(make_report(host, gpus=8) for host in built.servers))
    fabric_rebind(fabric=Switch.objects.first().fabric)
    leaf = Switch.objects.get(name="leaf-su0001-r1")
    answer = api.get(f"/api/v1/failure-domains/?switch={leaf.pk}").json()
    assert answer["servers"] == 0 and answer["target"]["name"] == "leaf-su0001-r1"
    assert sorted(d["hostname"] for d in answer["degraded_servers"]) == ["gpu00001", "gpu00002"]
    assert answer["degraded_servers"][0]["rails_lost"] == [1]
    assert answer["fabric"]["gbps_lost"] == 800.0 and "stay up" in answer["fabric"]["message"]

    spine = Switch.objects.get(name="spine-p001-01")
    answer = api.get(f"/api/v1/failure-domains/?switch={spine.pk}").json()
    assert answer["fabric"]["bisection_share_lost"] == 0.5 and answer["servers"] == 0
    assert api.get("/api/v1/failure-domains/?switch=999999").status_code == 400

    ranking = api.get("/api/v1/failure-domains/ranking/?by=switch").json()
    assert ranking["by"] == "switch" and ranking["items"][0]["gbps_lost"] > 0
    leaf_item = next(i for i in ranking["items"] if i["id"] == leaf.pk)
    # A leaf takes rail 1 of its two servers: bandwidth lost, servers and GPUs still up.
    assert (leaf_item["servers"], leaf_item["gpus"], leaf_item["nodes"]) == (0, 0, 0)
    assert (leaf_item["servers_degraded"], leaf_item["gpus_degraded"]) == (2, 16)
    assert leaf_item["rails_lost"] == [1] and leaf_item["gbps_lost"] == 800.0
    assert leaf_item["tier"] == 1 and "stay up" in leaf_item["message"]
    spine_item = next(i for i in ranking["items"] if i["id"] == spine.pk)
    assert spine_item["bisection_share_lost"] == 0.5 and spine_item["servers"] == 0
    assert "bisection" in spine_item["message"]
