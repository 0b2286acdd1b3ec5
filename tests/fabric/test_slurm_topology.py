"""The generated topology.conf read by a real slurmctld (Debian's 22.05, topology/tree).

A controller of its own (no slurmd needed: topology is the controller's business) is
configured with every node the SuperPOD capture names and `TopologyPlugin=topology/tree`,
reading the topology.conf this project writes for that capture. slurmctld refuses to start
on a switch or node name it cannot resolve, so its coming up is itself the first check;
`scontrol show topology` must then answer with exactly our switches and their nodes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import hostlist
import pytest

from fabric.exports import slurm_topology_conf
from fabric.models import Fabric
from fabric.selectors import fabric_scheduler_tree
from fabric.services import fabric_snapshot_ingest
from tests.conftest import require
from tests.integration.slurm_harness import (
    PACKAGES,
    SlurmCluster,
    _free_port,
    _start_munge,
    _which,
    missing_binaries,
)

pytestmark = [pytest.mark.slurm, pytest.mark.django_db]


def _slurm_conf(root: Path, port: int, nodes: list[str]) -> str:
    return "\n".join(
        [
            "ClusterName=fabricci",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={port}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={root}/munge/munge.sock",
            "CredType=cred/munge",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/run/slurmctld.pid",
            f"SlurmctldLogFile={root}/log/slurmctld.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "TopologyPlugin=topology/tree",
            "SlurmdTimeout=300",
            "MpiDefault=none",
            # No slurmd runs: each node its own host name (never resolved), a loopback address.
            *(
                f"NodeName={name} NodeHostname={name} NodeAddr=127.0.0.1 Port={20001 + i} "
                "CPUs=1 RealMemory=100 State=UNKNOWN"
                for i, name in enumerate(nodes)
            ),
            "PartitionName=all Nodes=ALL Default=YES State=UP",
            "",
        ]
    )


def _show_topology(text: str) -> dict[str, dict[str, str]]:
    switches = {}
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "SwitchName" in fields:
            switches[fields["SwitchName"]] = fields
    return switches


def test_slurmctld_reads_the_superpod_topology(superpod):
    missing = missing_binaries()
    require(not missing, f"Slurm not found ({', '.join(missing)}): apt-get install {PACKAGES}")
    require(os.geteuid() == 0, "slurmctld and munged run as root here")
    fabric_snapshot_ingest(fabric_name="superpod", raw=superpod)
    tree, notes = fabric_scheduler_tree(Fabric.objects.get())
    conf = slurm_topology_conf(tree, notes, "SuperPOD capture")
    nodes = sorted({n for names in tree.nodes.values() for n in names})
    assert len(tree.nodes) == 8 and len(nodes) > 100  # one switch per scalable unit

    root = Path(tempfile.mkdtemp(prefix="atlas-fabric-slurm-"))
    root.chmod(0o755)
    for sub in ("etc", "state", "spool", "run", "log"):
        (root / sub).mkdir()
    port = _free_port()
    (root / "etc" / "slurm.conf").write_text(_slurm_conf(root, port, nodes))
    (root / "etc" / "topology.conf").write_text(conf)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(root / "etc" / "slurm.conf")
    scontrol = _which("scontrol") or "scontrol"
    cluster = SlurmCluster(
        root=root,
        env=env,
        node_names=nodes,
        scontrol=scontrol,
        sinfo="sinfo",
        sbatch="sbatch",
        squeue="squeue",
        scancel="scancel",
    )
    try:
        _start_munge(cluster)
        cluster._spawn("slurmctld", [_which("slurmctld") or "slurmctld", "-D", "-i"])
        cluster._wait(
            lambda: "UP" in cluster.run(scontrol, "ping", timeout=5, check=False),
            30,
            "slurmctld answering ping",
        )
        shown = _show_topology(cluster.run(scontrol, "show", "topology"))
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)

    assert set(shown) == set(tree.nodes) | set(tree.children)
    for switch, names in tree.nodes.items():
        assert shown[switch]["Level"] == "0"
        assert sorted(hostlist.expand_hostlist(shown[switch]["Nodes"])) == names
    for switch, children in tree.children.items():
        assert shown[switch]["Level"] == "1"
        assert sorted(hostlist.expand_hostlist(shown[switch]["Switches"])) == children
