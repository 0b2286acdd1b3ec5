"""Snapshots: every field validated like a report's, YAML without aliases, large snapshots
applied by a worker with a status URL, the shrink hold, and one reconcile per burst."""

from __future__ import annotations

import json

import pytest

from clusters.models import Cluster, ClusterSnapshot, Node, ReconcileState
from clusters.services import snapshot_ingest, snapshot_ingest_document
from tests.nodes import k8s_node, k8s_node_list, scontrol_node, scontrol_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def post(staff_api, django_capture_on_commit_callbacks):
    """POST a snapshot body; on-commit work (worker tasks, reconcile) runs as a worker would."""

    def post(name: str, body: str | bytes, query: str = ""):
        with django_capture_on_commit_callbacks(execute=True):
            return staff_api.generic(
                "POST", f"/api/v1/clusters/{name}/snapshots/{query}", body, "text/plain"
            )

    return post


def live(name: str) -> list[str]:
    return sorted(
        Node.objects.filter(cluster__name=name, gone_at__isnull=True).values_list("name", flat=True)
    )


def nodes(*names: str, **fields) -> str:
    return k8s_node_list(*(k8s_node(n, **fields) for n in names))


# Field validation -------------------------------------------------------------------------


def broken_node(section: str, key: str, value: str) -> str:
    node = k8s_node("dgx-02")
    node["status"][section][key] = value
    return k8s_node_list(k8s_node("dgx-01"), node)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (broken_node("capacity", "cpu", "2147483648"), "nodes.1.cpus", "outside 0..2147483647"),
        (broken_node("capacity", "memory", "100Ei"), "nodes.1.memory_bytes", "outside"),
        (broken_node("capacity", "nvidia.com/gpu", "1e12"), "nodes.1.gpu_capacity", "outside"),
        (nodes("dgx-01", "n" * 254), "nodes.1.name", "254 characters; at most 253"),
        (
            nodes("dgx-01", labels={"nvidia.com/gpu.product": "H" * 2000}),
            "nodes.0.gpu_product",
            "at most 128",
        ),
        (
            nodes("dgx-01", labels={"example.com/note": "x" * 5000}),
            "nodes.0.labels.example.com/note",
            "at most 1024",
        ),
        (
            scontrol_text(scontrol_node("a"), scontrol_node("b", gres="gpu:h100:99999999999")),
            "nodes.1.gpu_capacity",
            "outside",
        ),
        (  # 64-bit GRES counts are kept; past 64 bits a count means nothing Slurm printed
            scontrol_text(scontrol_node("a"), scontrol_node("b", gres="gpu:8,vmem:9999999P")),
            "nodes.1.gres.1.count",
            "outside 0..9223372036854775807",
        ),
    ],
)
def test_a_bad_field_is_a_400_naming_node_and_field_and_keeps_the_node_set(
    post, body, field, words
):
    assert post("c", nodes("old-1", "old-2")).status_code == 201
    response = post("c", body)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert words in " ".join(errors.get(field, [])), errors
    assert "node '" in errors[field][0]
    assert live("c") == ["old-1", "old-2"]
    assert ClusterSnapshot.objects.filter(cluster_name="c").count() == 1  # the good one


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (nodes("a").replace('"224"', "NaN"), "body", "RFC 8259"),
        ('{"kind": "List", "items": ' + "[" * 10_000, "body", "deeper than 64"),
        (nodes("a\x00b"), "items.0.metadata.name", "NUL character"),
        (json.dumps({"kind": "List", "items": [k8s_node("\ud800")]}), "items.0.metadata.name", ""),
        ("NodeName=a\x00 State=IDLE\n", "body", "NUL character at line 1"),
        (b"NodeName=a State=IDLE \xff\n", "body", "not UTF-8"),
    ],
)
def test_json_and_text_outside_the_rules_are_400(post, body, field, words):
    response = post("c", body)
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["errors"][field])
    assert not Cluster.objects.exists()


YAML_LAUGHS = """apiVersion: v1
kind: List
metadata: {}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1, labels: {nvidia.com/x: *f}}
"""


def test_yaml_with_aliases_is_a_400_that_says_why(post):
    assert len(YAML_LAUGHS) < 600
    response = post("c", YAML_LAUGHS)
    assert response.status_code == 400
    assert "YAML aliases are not accepted" in response.json()["errors"]["body"][0]
    assert not Node.objects.exists()


def test_plain_kubectl_yaml_is_still_accepted(post):
    import yaml

    body = yaml.safe_dump(json.loads(nodes("dgx-01", "dgx-02")))
    response = post("c", body)
    assert response.status_code == 201, response.content
    assert live("c") == ["dgx-01", "dgx-02"]


def test_confirm_takes_only_shrink(post):
    response = post("c", nodes("a"), "?confirm=yes")
    assert response.status_code == 400 and "confirm" in response.json()["errors"]


# Large snapshots: stored, applied by a worker, a status URL -------------------------------


def test_a_large_snapshot_answers_202_with_a_status_url_and_a_worker_applies_it(
    post, staff_api, settings
):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    response = post("big", nodes(*(f"n{i}" for i in range(20))))
    assert response.status_code == 202, response.content
    answer = response.json()
    assert answer["status"] == "pending" and answer["url"].endswith(
        f"/api/v1/clusters/big/snapshots/{answer['id']}/"
    )
    status = staff_api.get(answer["url"]).json()  # the worker ran after commit
    assert (status["status"], status["nodes"], status["added"], status["gone"]) == (
        "applied",
        20,
        20,
        0,
    )
    assert len(live("big")) == 20
    assert ClusterSnapshot.objects.get().raw == b""  # the body is dropped once applied


def test_a_bad_large_snapshot_is_a_400_naming_the_field_and_keeps_the_node_set(post, settings):
    post("big", nodes("a", "b"))
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    response = post("big", broken_node("capacity", "cpu", "2147483648"))
    assert response.status_code == 400  # the worker's own checks, made before the 202
    assert "2147483648" in response.json()["errors"]["nodes.1.cpus"][0]
    assert live("big") == ["a", "b"] and ClusterSnapshot.objects.count() == 1


def test_the_cheap_checks_of_a_large_snapshot_answer_400_at_once(post, settings):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 10
    assert post("big", b"\xff" * 20).status_code == 400
    assert post("big", "NodeName=a\x00" * 3).status_code == 400
    assert post("big", " " * 20).status_code == 400
    assert not ClusterSnapshot.objects.exists()


def test_a_large_scontrol_text_naming_a_node_twice_is_400_naming_it(post, settings):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    body = scontrol_text(*(scontrol_node(f"n{i}") for i in range(50)), scontrol_node("n7"))
    response = post("big", body)
    assert response.status_code == 400
    (message,) = response.json()["errors"]["body"]
    assert message.startswith("scontrol output names node 'n7' twice")  # as the sync path says
    assert not ClusterSnapshot.objects.exists()


def test_a_large_snapshot_of_an_unknown_format_is_400_before_storing(post, settings):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    response = post("big", "hello world\n" * 100)
    assert response.status_code == 400
    assert "unrecognised snapshot format" in response.json()["errors"]["body"][0]
    assert not ClusterSnapshot.objects.exists()


def test_a_large_snapshot_of_the_other_kind_is_400_before_storing(post, settings):
    assert post("k8s", nodes("a")).status_code == 201
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    response = post("k8s", scontrol_text(*(scontrol_node(f"n{i}") for i in range(5))))
    assert response.status_code == 400
    assert response.json()["errors"]["body"] == [
        "cluster 'k8s' is a Kubernetes cluster; this is a slurm snapshot"
    ]
    assert ClusterSnapshot.objects.count() == 1


def test_a_large_scontrol_text_without_duplicates_is_accepted_and_applied(post, settings):
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    response = post("big", scontrol_text(*(scontrol_node(f"n{i}") for i in range(30))))
    assert response.status_code == 202
    assert len(live("big")) == 30


def test_a_pending_snapshot_survives_the_broker_and_the_sweep_applies_it(
    monkeypatch, post, settings
):
    from clusters import tasks

    def broker_down(snapshot_id):
        raise ConnectionError("redis is away")

    monkeypatch.setattr("clusters.api.views.enqueue_snapshot", broker_down)
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    settings.ATLAS_PENDING_SNAPSHOT_GRACE_S = 0
    response = post("big", nodes("a", "b", "c"))
    assert response.status_code == 202
    assert ClusterSnapshot.objects.get().status == "pending" and live("big") == []
    assert tasks.sweep_pending_snapshots() == 1
    assert ClusterSnapshot.objects.get().status == "applied" and live("big") == ["a", "b", "c"]
    assert tasks.sweep_pending_snapshots() == 0


def test_an_older_pending_snapshot_applied_after_a_newer_one_is_superseded(post, settings):
    from clusters.services import snapshot_apply

    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    import clusters.api.views as views

    views_enqueue = views.enqueue_snapshot
    views.enqueue_snapshot = lambda snapshot_id: None  # the worker is slow
    try:
        old = post("c", nodes("a", "b", "old")).json()["id"]
    finally:
        views.enqueue_snapshot = views_enqueue
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 10**6
    assert post("c", nodes("a", "b", "new")).status_code == 201
    assert snapshot_apply(snapshot_id=old) == "superseded"
    assert live("c") == ["a", "b", "new"]
    assert snapshot_apply(snapshot_id=old) == "skipped"  # idempotent


# The shrink hold ----------------------------------------------------------------------------


def test_a_snapshot_that_would_empty_more_than_half_a_cluster_is_held(post, staff_api):
    post("c", nodes("a", "b", "c", "d"))
    response = post("c", nodes("a"))
    assert response.status_code == 202
    held = response.json()
    assert held["status"] == "held" and held["gone"] == 3
    assert "3 of the 4 live nodes" in held["message"] and "confirm=shrink" in held["message"]
    assert live("c") == ["a", "b", "c", "d"]
    assert staff_api.get(held["url"]).json()["status"] == "held"
    assert "held" in staff_api.get("/api/v1/clusters/c/").json()["last_error"]


def test_a_held_snapshot_is_applied_when_the_next_one_agrees(post):
    post("c", nodes("a", "b", "c", "d"))
    first = post("c", nodes("a")).json()
    second = post("c", nodes("a"))
    assert second.status_code == 201 and second.json()["gone"] == 3
    assert live("c") == ["a"]
    assert ClusterSnapshot.objects.get(pk=first["id"]).status == "superseded"
    assert Cluster.objects.get().last_error == ""


def test_a_held_snapshot_is_dropped_when_the_next_one_is_whole_again(post):
    post("c", nodes("a", "b", "c", "d"))
    held = post("c", nodes("a")).json()
    response = post("c", nodes("a", "b", "c", "d"))
    assert response.status_code == 201 and response.json()["gone"] == 0
    assert live("c") == ["a", "b", "c", "d"]
    assert ClusterSnapshot.objects.get(pk=held["id"]).status == "superseded"


def test_a_different_shrunken_set_is_held_again(post):
    post("c", nodes("a", "b", "c", "d"))
    post("c", nodes("a"))
    assert post("c", nodes("b")).json()["status"] == "held"
    assert live("c") == ["a", "b", "c", "d"]


def test_confirm_shrink_applies_at_once_and_less_than_half_is_applied(post):
    post("c", nodes("a", "b", "c", "d", "e"))
    assert post("c", nodes("a", "b", "c")).status_code == 201  # 2 of 5: applied
    response = post("c", nodes("a"), "?confirm=shrink")
    assert response.status_code == 201 and live("c") == ["a"]


def test_a_pulled_node_list_is_held_the_same_way():
    snapshot_ingest(cluster_name="c", raw=nodes("a", "b", "c"))
    result = snapshot_ingest_document(cluster_name="c", document=json.loads(nodes()))
    assert result.status == "held" and live("c") == ["a", "b", "c"]
    again = snapshot_ingest_document(cluster_name="c", document=json.loads(nodes()))
    assert again.status == "applied" and live("c") == []


# One reconcile per burst --------------------------------------------------------------------


def test_a_burst_of_snapshots_enqueues_one_reconcile_until_it_starts(post, monkeypatch):
    from clusters import tasks

    enqueued = []
    monkeypatch.setattr(tasks.reconcile, "apply_async", lambda *a, **k: enqueued.append(1))
    kept = ("m", "k", "j")  # one node of four changes each time: no shrink to hold
    for i in range(40):
        assert post(f"c{i % 4}", nodes(f"n{i}", *kept)).status_code == 201
    assert len(enqueued) == 1

    tasks.reconcile.run()  # the worker starts it: the next change queues the next one
    post("c0", nodes("n0", *kept))
    assert len(enqueued) == 2

    ReconcileState.objects.update(requested_at="2000-01-01T00:00:00Z")  # a lost request
    post("c0", nodes("n0", *kept))
    assert len(enqueued) == 3


def test_a_failed_enqueue_leaves_no_request_behind(post, monkeypatch):
    from clusters import tasks

    def broker_down(*args, **kwargs):
        raise ConnectionError("redis is away")

    monkeypatch.setattr(tasks.reconcile, "apply_async", broker_down)
    assert post("c", nodes("a")).status_code == 201
    assert ReconcileState.objects.get().requested_at is None


def test_import_snapshot_says_held_and_applies_with_confirm_shrink(tmp_path):
    from django.core.management import CommandError, call_command

    (tmp_path / "all.json").write_text(nodes("a", "b", "c"))
    (tmp_path / "one.json").write_text(nodes("a"))
    call_command("import_snapshot", "c", str(tmp_path / "all.json"))
    with pytest.raises(CommandError, match="held: this snapshot would mark 2 of the 3"):
        call_command("import_snapshot", "c", str(tmp_path / "one.json"))
    assert live("c") == ["a", "b", "c"]
    call_command("import_snapshot", "c", str(tmp_path / "one.json"), "--confirm-shrink")
    assert live("c") == ["a"]


def test_snapshot_records_are_pruned_but_waiting_ones_kept(post, settings, monkeypatch):
    from clusters.services import snapshot_prune

    monkeypatch.setattr("clusters.api.views.enqueue_snapshot", lambda snapshot_id: None)
    settings.ATLAS_SNAPSHOT_RETENTION = 3
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 100
    pending = post("c", nodes("a", "b", "c", "d")).json()["id"]  # the worker never came
    settings.ATLAS_SNAPSHOT_SYNC_MAX_BYTES = 10**6
    for _ in range(5):
        post("c", nodes("a", "b", "c", "d"))
        post("other", nodes("x"))
    held = post("c", nodes("a")).json()["id"]
    assert snapshot_prune() == 3 + 2
    kept = set(ClusterSnapshot.objects.filter(cluster_name="c").values_list("status", flat=True))
    assert kept == {"pending", "applied", "held"}
    assert ClusterSnapshot.objects.filter(pk__in=[pending, held]).count() == 2
    assert ClusterSnapshot.objects.filter(cluster_name="other").count() == 3


# The shrink guard: half or more, or too many at once (issue 21, 6c) -------------------------


def one_line_scontrol(*names: str) -> str:
    """`scontrol -o show node` of these nodes: one line per record."""
    return "".join(
        " ".join(line.strip() for line in scontrol_node(n).strip().split("\n")) + "\n"
        for n in names
    )


def test_an_scontrol_o_listing_cut_at_a_line_end_after_half_its_lines_is_held(post, tmp_path):
    from django.core.management import CommandError, call_command

    names = [f"gpu{i:03d}" for i in range(1, 21)]
    whole = one_line_scontrol(*names)
    assert post("hpc", whole).status_code == 201
    half = "".join(whole.splitlines(keepends=True)[:10])  # cut exactly at a line end
    response = post("hpc", half)
    assert response.status_code == 202
    assert response.json()["status"] == "held" and response.json()["gone"] == 10
    assert "10 of the 20 live nodes" in response.json()["message"]
    assert live("hpc") == names
    # the same on the command line, for another cluster (the same set again would apply)
    (tmp_path / "whole.txt").write_text(whole)
    (tmp_path / "half.txt").write_text(half)
    call_command("import_snapshot", "hpc2", str(tmp_path / "whole.txt"))
    with pytest.raises(CommandError, match="held: this snapshot would mark 10 of the 20"):
        call_command("import_snapshot", "hpc2", str(tmp_path / "half.txt"))
    assert live("hpc2") == names


@pytest.mark.parametrize(
    ("before", "after", "held"),
    [
        (("a", "b"), ("a",), True),  # 1 of 2 is half
        (("a",), (), True),  # the last node of 1: all of them
        (("a", "b", "c"), ("a", "b"), False),  # 1 of 3
        (("a", "b", "c", "d", "e"), ("a", "b", "c"), False),  # 2 of 5
        (("a", "b", "c", "d"), ("a", "b"), True),  # exactly half
        (("a", "b"), ("a", "b", "c"), False),  # growth is never held
    ],
)
def test_half_or_more_of_the_live_nodes_going_is_held(post, before, after, held):
    assert post("c", nodes(*before)).status_code == 201
    response = post("c", nodes(*after))
    assert response.json()["status"] == ("held" if held else "applied")
    assert live("c") == sorted(before if held else after)


def test_more_than_the_set_number_going_at_once_is_held(post, settings):
    settings.ATLAS_SNAPSHOT_MAX_GONE_NODES = 3
    names = [f"n{i:02d}" for i in range(10)]
    assert post("c", nodes(*names)).status_code == 201
    response = post("c", nodes(*names[:6]))  # 4 of 10: under half, over the set number
    assert response.json()["status"] == "held"
    assert live("c") == names
    assert post("c", nodes(*names[:7])).json()["status"] == "applied"  # 3 of 10: not over
    assert live("c") == names[:7]


def test_the_max_gone_default_holds_a_large_cluster_losing_51_nodes():
    from django.conf import settings

    from clusters.services import shrink_held

    assert settings.ATLAS_SNAPSHOT_MAX_GONE_NODES == 50
    assert shrink_held(going=51, live=1000) and not shrink_held(going=50, live=1000)
    assert not shrink_held(going=0, live=0) and shrink_held(going=1, live=1)
