"""Load the demo fleet through the real API: agents' reports, then scheduler snapshots."""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from clusters.reconcile import reconcile_all
from inventory.models import AgentToken, HardwareProfile, Server, UserToken
from inventory.services import agent_token_create, user_token_create
from simulator.fleet import demo_servers, push_reports

from ... import demo


class Command(BaseCommand):
    help = (
        "Load a simulated fleet (H100 DGX servers, an A100 in MIG mode, VMs on a KVM host, "
        "L40S PCIe servers, a login node) through the real API, with a Kubernetes and a "
        "Slurm cluster. Creates the user admin (password from ATLAS_DEMO_PASSWORD, default "
        "'admin') when absent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--seed", default="0", help="the same seed gives the same fleet")

    def handle(self, *args, seed: str = "0", **options):
        user = self._admin()
        servers = demo_servers(seed)
        reports = [s.report() for s in servers]
        # Demo tokens are re-issued on every run: a key is never stored in clear text.
        AgentToken.objects.filter(name__startswith="demo:").delete()
        keys = [agent_token_create(name=f"demo:{r['host']['hostname']}")[1] for r in reports]
        UserToken.objects.filter(user=user, name="demo").delete()
        _api_token, api_key = user_token_create(user=user, name="demo")
        by_name = {r["host"]["hostname"]: r for r in reports}
        k8s = [by_name[n] for n in by_name if n.startswith(("dgx-h100-0", "gpu-vm"))]
        slurm = [
            by_name[n]
            for n in by_name
            if n.startswith(("dgx-h100-1", "dgx-h100-09", "dgx-a100", "gpu-l40s"))
        ]

        with demo.local_server() as url:
            results = push_reports(url, keys, reports, concurrency=4)
            refused = [r for r in results if r.outcome != "sent"]
            for r in refused:
                self.stderr.write(f"{r.hostname}: {r.outcome}: {r.error}")
            snapshots = [
                (demo.K8S_CLUSTER, demo.kubernetes_nodes(k8s), "application/json"),
                (
                    demo.K8S_CLUSTER,
                    demo.kubernetes_pods([r["host"]["hostname"] for r in k8s]),
                    "application/json",
                ),
                (demo.SLURM_CLUSTER, demo.slurm_nodes(slurm), "text/plain"),
            ]
            for cluster, body, content_type in snapshots:
                answer = demo.post(
                    f"{url}/api/v1/clusters/{cluster}/snapshots/",
                    body.encode(),
                    api_key,
                    content_type,
                )
                self.stdout.write(
                    f"snapshot {cluster}: {answer.get('format')}, {answer.get('nodes')} nodes"
                )

        # What people set and agents cannot know: racks and the expected hardware.
        for server in servers:
            if server.machine.virtualization == "none":
                Server.objects.filter(hostname=server.hostname).update(
                    rack=server.rack, rack_position=10 + 4 * (servers.index(server) % 4)
                )
        HardwareProfile.objects.update_or_create(
            name="DGX H100",
            defaults={
                "vendor": "NVIDIA",
                "product": "DGXH100",
                "expected_gpu_count": 8,
                "expected_gpu_model": "H100",
            },
        )
        result = reconcile_all()
        sent = len(results) - len(refused)
        self.stdout.write(
            self.style.SUCCESS(
                f"demo: {sent} servers reported, {result.nodes} nodes, {result.bound} bound, "
                f"{result.findings_open} open findings"
            )
        )

    def _admin(self):
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        if user is None:
            password = os.environ.get("ATLAS_DEMO_PASSWORD", "admin")
            user = User.objects.create_superuser("admin", "admin@example.invalid", password)
            self.stdout.write("created user admin (change its password outside a demo)")
        return user
