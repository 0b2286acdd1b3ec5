"""The demo fleet asked what issue 23 §2 asked of it: one GPU model per job unless mixing is
asked, alternatives that never take a node the answer excluded and that answer as they say
when asked, MIG by compute slices and where a profile is free, on the API as on the page."""

from urllib.parse import urlencode

import pytest
from django.core.management import call_command

from placement.planner import EXCLUDING
from placement.selectors import placement_choices
from placement.service import placement_find

pytestmark = pytest.mark.django_db(transaction=True)

MIXED = ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]
REQUESTS = [
    {"scheduler": "slurm", "gpus": 16},
    {"cluster": "hpc-slurm", "nodes": 1, "gpus_per_node": 8},
    {"cluster": "hpc-slurm", "nodes": 2, "gpus_per_node": 8},
    {"cluster": "hpc-slurm", "nodes": 3, "gpus_per_node": 4},
    {"cluster": "prod-k8s", "gpus": 9},
    {"gpus": 24},
    {"scheduler": "kubernetes", "gpus": 16},
    {"cluster": "hpc-slurm", "gpus": 8, "model": "L40S"},
    {"cluster": "prod-k8s", "gpus": 1, "mig_profile": "1g.10gb"},
    {"cluster": "hpc-slurm", "gpus": 20, "mig_profile": "1g"},
]


def _asked(params: dict) -> dict:
    """An alternative's query parameters as `placement_find` keywords."""
    found = dict(params)
    if "min_gpu_memory" in found:
        found["min_gpu_memory_bytes"] = found.pop("min_gpu_memory")
    return found


def test_the_demo_slurm_job_keeps_to_one_model_unless_mixing_is_asked(api, client, user):
    call_command("demo")
    client.force_login(user)
    # The demo's jobs leave 2 H100s free on dgx-h100-09 and one whole A100 on dgx-a100-01:
    # no one model holds 3 GPUs, so without mixing it does not fit.
    result = placement_find(scheduler="slurm", gpus=3)
    assert not result.fits and result.nodes == [] and result.models == []
    assert "no one GPU model holds 3 GPUs" in result.reason
    assert "fits only by mixing GPU models" in result.reason
    (mixing,) = [a for a in result.alternatives if a.params.get("mix_models")]
    mixed = placement_find(**_asked(mixing.params))
    assert mixed.fits and mixed.models == MIXED and "slowest GPU's pace" in mixed.cost
    assert [n.node for n in mixed.nodes] == mixing.nodes and len(mixing.nodes) == 2
    two = placement_find(cluster="hpc-slurm", gpus=2)  # one model holds it: it keeps to it
    assert two.fits and len(two.models) == 1 and two.cost is None
    # the API says the same, and the page's box asks the same
    body = api.get("/api/v1/placement/", {"scheduler": "slurm", "gpus": 3}).json()
    assert body["fits"] is False and body["reason"] == result.reason
    assert "model" not in body["blocked_counts"]
    asked = {"scheduler": "slurm", "gpus": 3, "mix_models": "true"}
    body = api.get("/api/v1/placement/", asked).json()
    assert body["fits"] and body["models"] == MIXED and body["cost"] == mixed.cost
    page = client.get("/placement/?" + urlencode({"tab": "placement", **asked}))
    assert page.context["result"].fits and page.context["result"].models == MIXED
    assert page.context["checked"]["mix_models"]
    unticked = client.get("/placement/?tab=placement&scheduler=slurm&gpus=3&mix_models=false")
    assert not unticked.context["result"].fits and not unticked.context["checked"]["mix_models"]


def test_every_alternative_answers_as_it_says_and_never_takes_an_excluded_node(api):
    call_command("demo")
    offered = 0
    for request in REQUESTS:
        result = placement_find(**request)
        excluded = {b.node for b in result.blocked if b.reason in EXCLUDING}
        for alternative in result.alternatives:
            offered += 1
            assert not excluded & set(alternative.nodes), (request, alternative)
            followed = placement_find(**_asked(alternative.params))
            assert followed.fits, (request, alternative)
            assert [n.node for n in followed.nodes] == alternative.nodes, (request, alternative)
            body = api.get("/api/v1/placement/", alternative.params).json()
            assert [n["node"] for n in body["nodes"]] == alternative.nodes
    assert offered >= 10
    # the demo's case: an 8-GPU Slurm node is wanted; dgx-h100-10 has 7 and a lost GPU
    one = placement_find(cluster="hpc-slurm", nodes=1, gpus_per_node=8)
    assert ("dgx-h100-10", "unhealthy_gpu") in {(b.node, b.reason) for b in one.blocked}
    assert all("dgx-h100-10" not in a.nodes for a in one.alternatives)


def test_the_demo_mig_requests_by_slices_and_where_a_profile_is_free(api, client, user):
    call_command("demo")
    client.force_login(user)
    by_slices = placement_find(scheduler="slurm", gpus=3, mig_profile="1g")
    assert by_slices.fits and by_slices.mig_profile == "1g.10gb"
    assert {g.mig_profile for n in by_slices.nodes for g in n.gpus} == {"1g.10gb"}
    upper = placement_find(gpus=2, mig_profile="1G.10GB")
    assert upper.fits and upper.mig_profile == "1g.10gb"
    # prod-k8s has no MIG: the answer says where 1g.10gb is free
    none = placement_find(cluster="prod-k8s", mig_profile="1g.10gb")
    assert not none.fits
    assert (
        none.reason
        == "no 1g.10gb in cluster prod-k8s; 9 free on Slurm cluster hpc-slurm: dgx-a100-01"
    )
    pod = api.get("/api/v1/placement/", {"scheduler": "kubernetes", "mig_profile": "1g"}).json()
    assert pod["fits"] is False and pod["reason"].startswith("no 1g in Kubernetes clusters")
    (where,) = pod["mig_elsewhere"]
    assert (where["cluster"], where["kind"], where["free"]) == ("hpc-slurm", "slurm", 9)
    assert where["nodes"] == ["dgx-a100-01"] and where["text"] in pod["reason"]
    nowhere = placement_find(mig_profile="7g")
    assert nowhere.reason.startswith("no 7g in any cluster")
    assert (
        "MIG profiles of the fleet: 1c.3g.40gb, 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb"
        in nowhere.reason
    )
    # the page offers the fleet's profiles, and their slices, to choose from
    assert placement_choices()["mig_profiles"] == [
        "1c.3g.40gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
    ]
    page = client.get(
        "/placement/?tab=placement&scheduler=slurm&gpus=3&mig_profile=1g"
    ).content.decode()
    assert '<option value="1g" label="any 1g profile">' in page
    assert '<option value="1g.10gb">' in page and "3 MIG 1g.10gb devices" in page
