"""Failure domains name the running workloads they hit (issue 24, 5): a server or rack stops
every workload with a GPU on it; a switch stops those on the servers it cuts off and slows
those spread over nodes with one on a server it degrades; the ranking ranks by them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fabric.models import Switch
from inventory.models import Nic, Server
from placement.failure_domains import failure_domain, failure_domain_ranking
from placement.failure_domains.arithmetic import (
    HeldGpus,
    Holdings,
    hit_counts,
    workload_words,
    workloads_hit,
)
from tests.reports import apply_reports, make_report
from tests.workloads.factories_joins import hold, workload

from .fleets import slurm_fleet
from .test_switch_failure import rail_fabric

pytestmark = pytest.mark.django_db


def names(hit: list[dict]) -> list[tuple[str, int, str]]:
    return [(w["scheduler_id"], w["gpus"], "stops" if w["stops"] else "slows") for w in hit]


def test_the_arithmetic_stops_what_is_on_lost_servers_and_slows_spread_jobs():
    def held(wid: int, server: int, node: str, gpus: int, user: str = "alice") -> HeldGpus:
        return HeldGpus(wid, str(wid), user, "slurm_job", "hpc", server, node, gpus)

    holdings = Holdings(
        [
            held(1, 1, "n1", 8),
            held(1, 2, "n2", 8),  # 16 GPUs, 2 nodes
            held(2, 2, "n2", 4, "bob"),  # one node
            held(3, 3, "n3", 2, "bob"),  # one node, degraded only
            held(4, 3, "n3", 8, "carol"),
            held(4, 4, "n4", 8, "carol"),  # spread, one node degraded
        ]
    )
    hit = workloads_hit(holdings, lost={2}, degraded={3})
    assert names(hit) == [("1", 8, "stops"), ("2", 4, "stops"), ("4", 8, "slows")]
    assert hit[0]["nodes"] == 2 and hit[0]["loses_bandwidth"] is False
    assert hit_counts(hit) == {"workloads": 3, "users": 3}
    assert workloads_hit(holdings, lost=(), degraded={1, 2})[0]["gpus"] == 16
    # above the leaves: a job whose servers share their leaves is not slowed
    spine = workloads_hit(holdings, lost=(), degraded={1, 2, 3, 4}, local={1: "a", 2: "a", 3: "a"})
    assert names(spine) == [("4", 16, "slows")]
    assert workload_words({"scheduler_id": "5679", "user": "alice", "gpus": 16}) == (
        "job 5679 of alice, 16 GPUs"
    )
    assert workload_words({"scheduler_id": "ml/t", "kind": "pods", "user": "", "gpus": 1}) == (
        "pods ml/t, 1 GPU"
    )


def test_a_server_failure_stops_every_workload_with_a_gpu_on_it():
    servers = slurm_fleet(["dgx-01", "dgx-02"])
    big = workload("5679", user="alice")
    hold(big, servers["dgx-01"], range(8))
    hold(big, servers["dgx-02"], range(8))
    small = workload("5680", user="bob")
    hold(small, servers["dgx-02"], [0])
    ended = workload("5600", user="dave", state="completed")
    hold(ended, servers["dgx-01"], [0], until=timezone.now() - timedelta(hours=1))

    answer = failure_domain(server=servers["dgx-01"].pk)
    assert answer["workloads"] == [
        {
            "id": big.pk,
            "scheduler_id": "5679",
            "user": "alice",
            "kind": "slurm_job",
            "cluster": "hpc",
            "nodes": 2,
            "gpus": 8,
            "stops": True,
            "loses_bandwidth": False,
        }
    ]
    Server.objects.filter(hostname__startswith="dgx").update(rack="r1")
    rack = failure_domain(rack="r1")
    assert names(rack["workloads"]) == [("5679", 16, "stops"), ("5680", 1, "stops")]


def test_a_name_switch_stops_the_cut_off_and_slows_the_spread(api):
    servers = slurm_fleet(["dgx-01", "dgx-02", "dgx-03"])
    Nic.objects.filter(server=servers["dgx-01"]).update(switch="leaf-1")  # cut off
    Nic.objects.filter(server=servers["dgx-02"], name="mlx5_0").update(switch="leaf-1")
    Nic.objects.filter(server=servers["dgx-02"], name="mlx5_1").update(switch="leaf-2")
    Nic.objects.filter(server=servers["dgx-03"]).update(switch="leaf-2")
    on_cut = workload("10", user="alice")
    hold(on_cut, servers["dgx-01"], range(4))
    spread = workload("11", user="bob")
    hold(spread, servers["dgx-02"], range(8))
    hold(spread, servers["dgx-03"], range(8))
    local = workload("12", user="carol")
    hold(local, servers["dgx-01"], [4, 5])
    alone = workload("13", user="erin")  # one node on the degraded server: keeps its links
    hold(alone, servers["dgx-03"], [0])

    answer = api.get("/api/v1/failure-domains/", {"switch": "leaf-1"}).json()
    assert names(answer["workloads"]) == [
        ("10", 4, "stops"),
        ("12", 2, "stops"),
        ("11", 8, "slows"),
    ]
    assert answer["workloads"][2]["loses_bandwidth"] is True


def test_a_fabric_leaf_slows_a_job_spread_across_leaves_and_a_spine_too(api):
    servers = rail_fabric()
    job = workload("700", user="alice")
    hold(job, servers["gpu00001"], range(8))
    hold(job, servers["gpu00003"], range(8))
    # under one set of leaves: a leaf's rail slows it, a spine never carries its traffic
    under_one_leaf = workload("701", user="bob")
    hold(under_one_leaf, servers["gpu00003"], [0])
    hold(under_one_leaf, servers["gpu00004"], [0])
    leaf = Switch.objects.get(name="leaf-su0001-r3")
    answer = api.get(f"/api/v1/failure-domains/?switch={leaf.pk}").json()
    assert names(answer["workloads"]) == [("700", 8, "slows")]
    other_leaf = Switch.objects.get(name="leaf-su0002-r1")
    answer = api.get(f"/api/v1/failure-domains/?switch={other_leaf.pk}").json()
    assert names(answer["workloads"]) == [("700", 8, "slows"), ("701", 2, "slows")]
    spine = Switch.objects.filter(name="spine-p001-01").order_by("pk").last()
    assert spine is not None
    answer = api.get(f"/api/v1/failure-domains/?switch={spine.pk}").json()
    assert names(answer["workloads"]) == [("700", 16, "slows")]


def test_the_ranking_ranks_by_workloads_or_users_hit(api):
    servers = apply_reports(*(make_report(h, gpus=g) for h, g in (("big", 8), ("busy", 2))))
    Server.objects.filter(hostname="big").update(rack="r-big")
    Server.objects.filter(hostname="busy").update(rack="r-busy")
    hold(workload("1", user="alice"), servers["big"], range(8))
    hold(workload("2", user="bob"), servers["busy"], [0])
    hold(workload("3", user="bob"), servers["busy"], [1])

    by_gpus = api.get("/api/v1/failure-domains/ranking/", {"by": "rack"}).json()
    assert [(i["name"], i["workloads"], i["users"]) for i in by_gpus["items"]] == [
        ("r-big", 1, 1),
        ("r-busy", 2, 1),
    ]
    by_workloads = api.get(
        "/api/v1/failure-domains/ranking/", {"by": "rack", "rank": "workloads"}
    ).json()
    assert by_workloads["rank"] == "workloads"
    assert [i["name"] for i in by_workloads["items"]] == ["r-busy", "r-big"]
    by_users = failure_domain_ranking(by="server", rank="users")["items"]
    assert [i["name"] for i in by_users] == ["big", "busy"]  # a tie on users: GPUs decide
    bad = api.get("/api/v1/failure-domains/ranking/", {"rank": "nope"})
    assert bad.status_code == 400 and "rank" in bad.content.decode()


def test_the_switch_ranking_counts_the_workloads_a_leaf_hits():
    servers = rail_fabric()
    job = workload("700", user="alice")
    hold(job, servers["gpu00001"], range(8))
    hold(job, servers["gpu00003"], range(8))
    local = workload("701", user="bob")
    hold(local, servers["gpu00003"], [0])
    hold(local, servers["gpu00004"], [0])
    items = failure_domain_ranking(by="switch", rank="workloads", limit=1000)["items"]
    by_name = {i["name"].split("/")[-1]: (i["workloads"], i["users"]) for i in items}
    assert by_name["leaf-su0002-r1"] == (2, 2)  # rail 1 of both jobs' nodes
    assert by_name["leaf-su0001-r1"] == (1, 1)
    spine = next(v for k, v in by_name.items() if k.startswith("spine-p001"))
    assert spine == (1, 1)  # the job under one set of leaves never reaches a spine
    assert items[0]["workloads"] == 2  # ranked by workloads


def test_workloads_cost_one_query_however_many_there_are():
    def cost(n: int, prefix: str) -> tuple[int, int]:
        hosts = [f"{prefix}{i:02d}" for i in range(n)]
        servers = slurm_fleet(hosts, cluster=prefix)
        for i, host in enumerate(hosts):
            work = workload(f"{prefix}{i}", cluster=prefix, user=f"u{i}")
            hold(work, servers[host], range(4))
            hold(work, servers[hosts[(i + 1) % n]], range(4, 8))
        Server.objects.filter(hostname__in=hosts).update(rack=f"{prefix}-r")
        with CaptureQueriesContext(connection) as domain:
            answer = failure_domain(rack=f"{prefix}-r")
        assert len(answer["workloads"]) == n
        with CaptureQueriesContext(connection) as ranking:
            failure_domain_ranking(by="rack", rank="workloads")
        return len(domain), len(ranking)

    assert cost(2, "few") == cost(8, "many")


def test_the_failure_tab_names_the_workloads_it_stops_escaped(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("ops"))
    servers = slurm_fleet(["dgx-01", "dgx-02"])
    big = workload("5679", user="alice")
    hold(big, servers["dgx-01"], range(8))
    hold(big, servers["dgx-02"], range(8))
    hold(workload("<b>9</b>", user="<script>x</script>"), servers["dgx-01"], [0])
    Server.objects.filter(hostname__startswith="dgx").update(rack="r1")
    page = client.get("/placement/?tab=failure&rack=r1").content.decode()
    assert f'href="/workloads/{big.pk}/">job 5679 of alice, 16 GPUs</a>' in page
    assert "stops" in page
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<b>9</b>" not in page
    ranking = client.get("/placement/?tab=failure").content.decode()
    assert "Workloads (users)" in ranking and "2 (2)" in ranking
    by_users = client.get("/placement/?tab=failure&rank=users").content.decode()
    assert "Racks by users" in by_users and "<strong>users</strong>" in by_users
    assert "Racks by GPUs" in client.get("/placement/?tab=failure&rank=nope").content.decode()
