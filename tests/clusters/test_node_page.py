"""A page for every node: what the scheduler says, its server and findings; staff bind it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.choices import BindingMethod
from clusters.models import Node
from clusters.reconcile import reconcile_all
from clusters.selectors import node_labels_that_matter
from clusters.services import snapshot_ingest
from tests.nodes import k8s_node, k8s_node_list
from tests.reports import apply_reports, make_report

pytestmark = pytest.mark.django_db


def test_labels_that_matter_keep_the_gpu_ones_in_order():
    labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "H100", "x": "y"}
    assert node_labels_that_matter(labels) == [
        ("nvidia.com/gpu.product", "H100"),
        ("nvidia.com/mig.strategy", "single"),
    ]


@pytest.fixture
def unbound_node():
    apply_reports(make_report("dgx-01", gpus=2), make_report("dgx-02", gpus=2))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("vm-<7>", gpus=2)))
    reconcile_all()
    return Node.objects.get(name="vm-<7>")


def test_the_node_page_says_what_the_scheduler_says(client, user, unbound_node):
    client.force_login(user)
    body = client.get(f"/nodes/{unbound_node.pk}/").content.decode()
    assert "vm-&lt;7&gt;" in body and "vm-<7>" not in body
    assert "capacity 2" in body and "No server is bound" in body
    assert "Node without a server" in body  # its finding, linked
    assert 'id="bind-form"' not in body  # readers do not bind


def test_node_names_link_to_their_page(client, user, unbound_node):
    client.force_login(user)
    assert f'href="/nodes/{unbound_node.pk}/"' in client.get("/nodes/").content.decode()


def test_staff_bind_with_the_picker_and_unbind(client, staff, unbound_node):
    client.force_login(staff)
    body = client.get(f"/nodes/{unbound_node.pk}/").content.decode()
    assert '<datalist id="server-choices">' in body and '<option value="dgx-02">' in body
    response = client.post(f"/nodes/{unbound_node.pk}/", {"action": "bind", "server": "DGX-02"})
    assert response.status_code == 302
    unbound_node.refresh_from_db()
    assert unbound_node.server.hostname == "dgx-02"
    assert unbound_node.binding_method == BindingMethod.MANUAL
    client.post(f"/nodes/{unbound_node.pk}/", {"action": "unbind"})
    unbound_node.refresh_from_db()
    assert (unbound_node.server, unbound_node.binding_method) == (None, BindingMethod.NONE)


def test_an_unknown_server_is_a_field_error_keeping_the_input(client, staff, unbound_node):
    client.force_login(staff)
    response = client.post(f"/nodes/{unbound_node.pk}/", {"action": "bind", "server": "nope-9"})
    body = response.content.decode()
    assert response.status_code == 200 and "No server is named" in body and 'value="nope-9"' in body


def test_a_reader_cannot_bind(client, user, unbound_node):
    client.force_login(user)
    response = client.post(f"/nodes/{unbound_node.pk}/", {"action": "bind", "server": "dgx-01"})
    assert response.status_code == 403


def test_the_node_page_costs_the_same_queries_for_few_and_many_servers(client, staff):
    client.force_login(staff)
    apply_reports(make_report("dgx-01", gpus=2))
    snapshot_ingest(cluster_name="prod", raw=k8s_node_list(k8s_node("n1", gpus=2)))
    reconcile_all()
    node = Node.objects.get()

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/nodes/{node.pk}/").status_code == 200
        return len(ctx.captured_queries)

    small = count()
    apply_reports(*(make_report(f"dgx-{i:02d}", gpus=1) for i in range(2, 30)))
    assert count() == small


def test_a_server_set_without_a_method_is_not_called_bound_by_unbound(client, user, unbound_node):
    from inventory.models import Server

    Node.objects.filter(pk=unbound_node.pk).update(server=Server.objects.get(hostname="dgx-01"))
    client.force_login(user)
    body = client.get(f"/nodes/{unbound_node.pk}/").content.decode()
    assert 'id="node-server"' in body and "dgx-01" in body and "bound by" not in body


def test_a_slurm_node_shows_its_gres_as_slurm_writes_it(client, user):
    from tests.nodes import scontrol_node, scontrol_text

    snapshot_ingest(cluster_name="hpc", raw=scontrol_text(scontrol_node("gpu-01")))
    node = Node.objects.get(name="gpu-01")
    node.gres = [{**node.gres[0], "used": 4, "used_indexes": "0-3"}]
    node.save(update_fields=["gres"])
    client.force_login(user)
    body = client.get(f"/nodes/{node.pk}/").content.decode()
    assert "gpu:h100:8 (4 used: IDX 0-3)" in body
    assert "&#x27;name&#x27;" not in body and "{'name'" not in body  # not a Python dict
