"""Rules on who is who: nodes no server backs, servers no node uses, identities and GPUs that
two machines claim."""

from __future__ import annotations

from collections import defaultdict

from findings.choices import FindingType, Severity
from findings.facts import FindingFact
from inventory.identity import short_hostname

from .types import ClaimedGpu, Fleet, NodeFacts, ServerFacts
from .words import plural, scheduler_name


def node_without_server(fleet: Fleet) -> list[FindingFact]:
    """A scheduler node whose identity matches no server: no agent runs there (or it cannot
    be told apart; that is a duplicate identity instead)."""
    found = []
    for node in fleet.nodes:
        if fleet.server_of(node) is not None or node.id in fleet.ambiguous:
            continue
        found.append(
            FindingFact(
                FindingType.NODE_WITHOUT_SERVER,
                Severity.WARNING if node.gpu_capacity else Severity.INFO,
                node.subject,
                f"{node.label}: {scheduler_name(node.kind)} node with "
                f"{plural(node.gpu_capacity, 'GPU')} and no agent report from its server (no "
                "server with its system UUID, machine-id, name or address); install the agent "
                "or bind it by hand",
                node_id=node.id,
                cluster_id=node.cluster_id,
            )
        )
    return found


def server_without_node(fleet: Fleet) -> list[FindingFact]:
    """A GPU server in no scheduler (once there is a scheduler at all). A KVM host whose VMs
    are bound is in use through them."""
    if not fleet.clusters:
        return []
    bound = fleet.nodes_by_server
    hosts_with_bound_vms = {
        s.physical_host_id for s in fleet.servers.values() if s.physical_host_id and s.id in bound
    }
    return [
        FindingFact(
            FindingType.SERVER_WITHOUT_NODE,
            Severity.WARNING,
            s.subject,
            f"{s.hostname}: {plural(s.gpus, 'GPU')} in no scheduler: no Kubernetes or "
            "Slurm node binds to this server",
            server_id=s.id,
        )
        for s in fleet.servers.values()
        if s.gpus and s.id not in bound and s.id not in hosts_with_bound_vms
    ]


def duplicate_identity(fleet: Fleet) -> list[FindingFact]:
    """One identity, several machines: a node matching several servers, servers sharing a
    machine-id (a cloned image) or a short hostname, several nodes of a cluster on one server."""
    return [
        *ambiguous_nodes(fleet),
        *_shared_machine_ids(fleet),
        *_shared_hostnames(fleet),
        *nodes_sharing_a_server(fleet),
    ]


def ambiguous_nodes(fleet: Fleet) -> list[FindingFact]:
    """A node whose identity matches several servers (`node:<id>`): unbound, or kept on the
    server it was bound to while another live server reports its name or address (a copied
    token, image or hostname; the binding waits for a person, as GPUs a copy claims do)."""
    found = []
    for node in fleet.nodes:
        if node.id not in fleet.ambiguous:
            continue
        matched = fleet.ambiguous[node.id]
        holder = fleet.server_of(node)
        if holder is None:
            found.append(_unbound_ambiguous(node, matched, fleet))
            continue
        others = [fleet.servers.get(i) for i in sorted(matched) if i != holder.id]
        claimants = [s for s in others if s is not None and fleet.is_live(s)]
        if claimants:
            found.append(_claimed_twice(node, holder, claimants))
    return found


def _unbound_ambiguous(node: NodeFacts, matched: frozenset[int], fleet: Fleet) -> FindingFact:
    names = sorted(fleet.servers[i].hostname for i in matched)
    return FindingFact(
        FindingType.DUPLICATE_IDENTITY,
        Severity.WARNING,
        node.subject,
        f"{node.label}: its identity matches {len(names)} servers ({', '.join(names)}); "
        "bind it by hand or fix the duplicate hostname or address",
        node_id=node.id,
        cluster_id=node.cluster_id,
        details={"servers": names},
    )


def _claimed_twice(
    node: NodeFacts, holder: ServerFacts, claimants: list[ServerFacts]
) -> FindingFact:
    """Server ids name the claimants: a copied hostname makes the names alike."""
    others = ", ".join(f"{s.hostname} (server {s.id})" for s in claimants)
    what = _METHOD_WORDS.get(node.binding_method, "identity")
    return FindingFact(
        FindingType.DUPLICATE_IDENTITY,
        Severity.WARNING,
        node.subject,
        f"{node.label}: bound to {holder.hostname} (server {holder.id}), whose {what} "
        f"{others} also reports; the node stays on {holder.hostname} until a person binds it "
        "by hand or the copy stops (a copied agent token, disk image or hostname?)",
        node_id=node.id,
        cluster_id=node.cluster_id,
        server_id=holder.id,
        details={
            "servers": sorted([holder.id, *(s.id for s in claimants)]),
            "bound_to": holder.id,
        },
    )


_METHOD_WORDS = {"fqdn": "FQDN", "hostname": "hostname", "address": "address"}


def _shared_machine_ids(fleet: Fleet) -> list[FindingFact]:
    """Servers sharing a machine-id (`machine-id:<id>`)."""
    by_mid: dict[str, list[ServerFacts]] = defaultdict(list)
    for s in fleet.servers.values():
        if s.machine_id:
            by_mid[s.machine_id].append(s)
    found = []
    for mid, group in by_mid.items():
        if len(group) > 1:
            names = sorted(s.hostname for s in group)
            found.append(
                FindingFact(
                    FindingType.DUPLICATE_IDENTITY,
                    Severity.WARNING,
                    f"machine-id:{mid}",
                    f"{', '.join(names)} share the machine-id {mid}: a cloned image? Regenerate "
                    "/etc/machine-id, or Kubernetes nodes may bind to the wrong server",
                    server_id=group[0].id,
                    details={"servers": names},
                )
            )
    return found


def _shared_hostnames(fleet: Fleet) -> list[FindingFact]:
    """Servers sharing a short hostname (`hostname:<name>`)."""
    by_name: dict[str, list[ServerFacts]] = defaultdict(list)
    for s in fleet.servers.values():
        by_name[short_hostname(s.hostname)].append(s)
    return [
        FindingFact(
            FindingType.DUPLICATE_IDENTITY,
            Severity.WARNING,
            f"hostname:{name}",
            f"{len(group)} servers report the hostname {name}; Slurm nodes cannot tell them apart",
            server_id=group[0].id,
            details={"servers": sorted(s.id for s in group)},
        )
        for name, group in by_name.items()
        if len(group) > 1 and name
    ]


def nodes_sharing_a_server(fleet: Fleet) -> list[FindingFact]:
    """Several nodes of one cluster bound to one server (`cluster:<id>:server:<id>`)."""
    found = []
    for server_id, bound in fleet.nodes_by_server.items():
        if len(bound) < 2:
            continue
        by_cluster: dict[int, list[NodeFacts]] = defaultdict(list)
        for node in bound:
            by_cluster[node.cluster_id].append(node)
        for cluster_id, group in by_cluster.items():
            if len(group) < 2:
                continue
            names = sorted(n.name for n in group)
            found.append(
                FindingFact(
                    FindingType.DUPLICATE_IDENTITY,
                    Severity.WARNING,
                    f"cluster:{cluster_id}:server:{server_id}",
                    f"{fleet.clusters[cluster_id]}: nodes {', '.join(names)} all bind to "
                    f"{fleet.servers[server_id].hostname}; one server should be one node per "
                    "cluster (VMs report their own UUIDs)",
                    server_id=server_id,
                    cluster_id=cluster_id,
                    details={"nodes": names},
                )
            )
    return found


def duplicate_gpu(fleet: Fleet) -> list[FindingFact]:
    """A server whose report lists GPUs (or MIG devices) another live server still reports.

    The holder keeps them (an agent writes only its own server) until its own report drops
    them or it goes offline; the finding lasts while both servers are live and claim them.
    """
    found = []
    for s in fleet.servers.values():
        by_holder: dict[int, list[ClaimedGpu]] = defaultdict(list)
        for claim in s.gpu_claims:
            by_holder[claim.holder_id].append(claim)
        for holder_id, claims in sorted(by_holder.items()):
            holder = fleet.servers.get(holder_id)
            if holder is None or not (fleet.is_live(s) and fleet.is_live(holder)):
                continue
            gpus = [c for c in claims if not c.mig_device_id]
            migs = [c for c in claims if c.mig_device_id]
            named = [f"serial {c.serial}" if c.serial else c.uuid for c in gpus]
            named += [c.uuid for c in migs]
            more = f" and {len(named) - 3} more" if len(named) > 3 else ""
            listed = ", ".join(named[:3]) + more
            what = " and ".join(
                part
                for part in (
                    plural(len(gpus), "GPU") if gpus else "",
                    plural(len(migs), "MIG device") if migs else "",
                )
                if part
            )
            found.append(
                FindingFact(
                    FindingType.DUPLICATE_GPU,
                    Severity.WARNING,
                    f"server:{s.id}:gpus-of:{holder_id}",
                    f"{s.hostname} reports {what} that {holder.hostname} also reports "
                    f"({listed}); they stay with {holder.hostname} until its own report no "
                    "longer lists them or it goes offline. If both keep reporting them, one "
                    "agent describes another machine (a copied token or disk image, or saved "
                    "nvidia-smi files of another server)",
                    server_id=s.id,
                    details={
                        "claimant": s.hostname,
                        "holder": holder.hostname,
                        "uuids": sorted(c.uuid for c in claims),
                    },
                )
            )
    return found
