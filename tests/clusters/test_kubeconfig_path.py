"""A cluster's kubeconfig path is confined to ATLAS_KUBECONFIG_DIR: when saved, and at pull."""

from __future__ import annotations

import os

import pytest

from clusters.choices import ClusterKind, ClusterSource
from clusters.kubeconfig import KubeconfigPathRefused, kubeconfig_path_resolve
from clusters.models import Cluster
from clusters.tasks import sync_cluster


@pytest.fixture
def kube_dir(tmp_path):
    directory = tmp_path / "kubeconfigs"
    directory.mkdir()
    (directory / "prod.yaml").write_text("apiVersion: v1\n")
    (tmp_path / "secret.key").write_text("-----BEGIN PRIVATE KEY-----\nhush\n")
    return directory


@pytest.mark.parametrize("path", ["prod.yaml", "sub/../prod.yaml", "later.yaml"])
def test_paths_inside_the_directory_resolve_there(kube_dir, path):
    assert kubeconfig_path_resolve(path, kube_dir) == (kube_dir / path).resolve()


def test_an_absolute_path_inside_is_accepted(kube_dir):
    path = str(kube_dir / "prod.yaml")
    assert kubeconfig_path_resolve(path, kube_dir) == kube_dir / "prod.yaml"


@pytest.mark.parametrize(
    "path",
    [
        "../secret.key",
        "/etc/passwd",
        ".",
        "",
        "prod.yaml/../../secret.key",
        "bad\x00name",
    ],
)
def test_paths_outside_the_directory_are_refused(kube_dir, path):
    with pytest.raises(KubeconfigPathRefused):
        kubeconfig_path_resolve(path, kube_dir)


def test_a_sibling_with_the_same_prefix_is_outside(kube_dir):
    sibling = kube_dir.parent / "kubeconfigs-evil"
    sibling.mkdir()
    (sibling / "x.yaml").write_text("")
    with pytest.raises(KubeconfigPathRefused):
        kubeconfig_path_resolve(str(sibling / "x.yaml"), kube_dir)


def test_a_link_counts_where_it_points(kube_dir):
    os.symlink(kube_dir.parent / "secret.key", kube_dir / "innocent.yaml")
    os.symlink(kube_dir / "prod.yaml", kube_dir / "alias.yaml")
    with pytest.raises(KubeconfigPathRefused):
        kubeconfig_path_resolve("innocent.yaml", kube_dir)
    assert kubeconfig_path_resolve("alias.yaml", kube_dir) == kube_dir / "prod.yaml"


def register(api, path):
    return api.post(
        "/api/v1/clusters/",
        {"name": "lab", "kind": "kubernetes", "source": "kubeconfig", "kubeconfig_path": path},
        format="json",
    )


@pytest.mark.django_db
def test_the_api_refuses_a_path_outside_with_a_field_error(staff_api, settings, kube_dir):
    settings.ATLAS_KUBECONFIG_DIR = kube_dir
    response = register(staff_api, "../secret.key")
    assert response.status_code == 400
    body = response.json()
    errors = body.get("errors", body)  # DRF's field errors, wrapped or not
    assert list(errors) == ["kubeconfig_path"]
    assert "ATLAS_KUBECONFIG_DIR" in errors["kubeconfig_path"][0]
    assert "hush" not in response.content.decode()
    assert not Cluster.objects.exists()

    assert register(staff_api, "prod.yaml").status_code == 201
    patch = staff_api.patch(
        "/api/v1/clusters/lab/", {"kubeconfig_path": "/etc/passwd"}, format="json"
    )
    assert patch.status_code == 400 and "kubeconfig_path" in patch.content.decode()
    assert Cluster.objects.get().kubeconfig_path == "prod.yaml"


@pytest.mark.django_db
def test_the_admin_form_refuses_a_path_outside(admin_client, settings, kube_dir):
    settings.ATLAS_KUBECONFIG_DIR = kube_dir
    form = {
        "name": "lab",
        "kind": "kubernetes",
        "source": "kubeconfig",
        "kubeconfig_path": str(kube_dir.parent / "secret.key"),
        "sync_interval_s": 300,
    }
    response = admin_client.post("/admin/clusters/cluster/add/", form)
    assert response.status_code == 200  # the form again, with the error
    assert "ATLAS_KUBECONFIG_DIR" in str(response.context["adminform"].form.errors)
    assert not Cluster.objects.exists()
    form["kubeconfig_path"] = "prod.yaml"
    assert admin_client.post("/admin/clusters/cluster/add/", form).status_code == 302
    assert Cluster.objects.get().kubeconfig_path == "prod.yaml"


@pytest.mark.django_db
def test_the_pull_refuses_a_path_outside_however_it_was_stored(settings, kube_dir):
    settings.ATLAS_KUBECONFIG_DIR = kube_dir
    os.symlink(kube_dir.parent / "secret.key", kube_dir / "swapped.yaml")
    cluster = Cluster.objects.create(  # create() runs no validator: as an old row would be
        name="lab",
        kind=ClusterKind.KUBERNETES,
        source=ClusterSource.KUBECONFIG,
        kubeconfig_path="swapped.yaml",
    )
    assert sync_cluster.run(cluster.pk) == "failed"
    cluster.refresh_from_db()
    assert "ATLAS_KUBECONFIG_DIR" in cluster.last_error
    assert "hush" not in cluster.last_error and "PRIVATE" not in cluster.last_error
