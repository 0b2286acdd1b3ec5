"""`manage.py demo`, what `make run` shows: the fleet through the real API, both schedulers."""

import pytest
from django.core.management import call_command

from clusters.models import Cluster, Finding, Node
from inventory.models import Server


@pytest.mark.django_db(transaction=True)
def test_demo_loads_the_fleet_through_the_api_and_reconciles(capsys):
    call_command("demo")
    assert Server.objects.count() == 18
    assert set(Cluster.objects.values_list("name", "kind")) == {
        ("prod-k8s", "kubernetes"),
        ("hpc-slurm", "slurm"),
    }
    assert Node.objects.filter(server__isnull=True).get().name == "gpu-b02"
    vm = Server.objects.get(hostname="gpu-vm-01")
    assert vm.physical_host.hostname == "kvm-01"
    open_types = set(
        Finding.objects.filter(resolved_at__isnull=True).values_list("type", flat=True)
    )
    assert {"gpu_not_in_nvml", "node_without_server", "below_profile"} <= open_types
    assert Node.objects.get(cluster__name="hpc-slurm", name="dgx-a100-01").gpu_capacity > 8
    assert "18 servers reported" in capsys.readouterr().out
    call_command("demo")  # a second run updates the same servers
    assert Server.objects.count() == 18
