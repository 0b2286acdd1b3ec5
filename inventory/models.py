"""The physical truth: what the agents on the servers report.

Identity: a server is its SMBIOS system UUID, else its machine-id, else its hostname (see
`inventory.identity`). A GPU is its NVML UUID, wherever it sits; a MIG device is its UUID.
Rows are never deleted by a report: a GPU the last report no longer shows becomes `lost`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .choices import ChangeKind, GpuStatus, NicKind, ReportStatus, ServerState
from .health import HEALTH_FIELDS, UNHEALTHY, GpuHealth, gpu_health


class HardwareProfile(models.Model):
    """What a kind of server should hold: the fourth side of GPU drift.

    Matches servers by vendor and product (as DMI reports them), or is set on one server.
    """

    name = models.CharField(max_length=100, unique=True)
    vendor = models.CharField(max_length=128, blank=True, default="", help_text="empty: any")
    product = models.CharField(max_length=128, blank=True, default="")
    expected_gpu_count = models.PositiveIntegerField()
    expected_gpu_model = models.CharField(
        max_length=128, blank=True, default="", help_text="substring of the NVML name, e.g. H100"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Server(models.Model):
    """A physical machine, or a VM on one, as its agent describes it."""

    identity = models.CharField(
        max_length=300,
        unique=True,
        help_text="uuid:<system uuid>, machine-id:<id> or hostname:<name>",
    )
    system_uuid = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    machine_id = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    hostname = models.CharField(max_length=253, db_index=True)
    fqdn = models.CharField(max_length=253, blank=True, default="")
    addresses = models.JSONField(default=list, blank=True)
    declared_kubernetes_node = models.CharField(
        max_length=253,
        blank=True,
        default="",
        help_text="the Kubernetes node its agent says it is (spec.nodeName); binds that node first",
    )
    declared_slurm_node = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="the Slurm node its agent says it is (slurmd -C); binds that node first",
    )

    vendor = models.CharField(max_length=128, blank=True, default="")
    product = models.CharField(max_length=128, blank=True, default="")
    serial = models.CharField(max_length=128, blank=True, default="")
    cpu_model = models.CharField(max_length=200, blank=True, default="")
    cpu_sockets = models.PositiveIntegerField(null=True, blank=True)
    cpu_cores = models.PositiveIntegerField(null=True, blank=True)
    cpu_threads = models.PositiveIntegerField(null=True, blank=True)
    memory_total_bytes = models.BigIntegerField(null=True, blank=True)
    numa_nodes = models.PositiveIntegerField(null=True, blank=True)
    os_name = models.CharField(max_length=200, blank=True, default="")
    kernel = models.CharField(max_length=200, blank=True, default="")

    driver_version = models.CharField(max_length=64, blank=True, default="")
    cuda_version = models.CharField(max_length=64, blank=True, default="")
    nvml_version = models.CharField(max_length=64, blank=True, default="")
    nvml_error = models.TextField(blank=True, default="")
    agent_version = models.CharField(max_length=64, blank=True, default="")
    agent_source = models.CharField(max_length=32, blank=True, default="")
    nvswitch_count = models.PositiveIntegerField(null=True, blank=True)
    pci_gpus = models.JSONField(
        default=list, blank=True, help_text="NVIDIA GPU functions on the PCI bus, with their driver"
    )
    pci_gpu_count = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs on the PCI bus not passed through to a VM"
    )
    warnings = models.JSONField(default=list, blank=True)

    is_virtual = models.BooleanField(default=False)
    hypervisor = models.CharField(max_length=64, blank=True, default="")
    physical_host = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="virtual_machines"
    )
    physical_host_manual = models.BooleanField(
        default=False, help_text="physical_host was set by a person; agents do not change it"
    )

    # Set by people (API, admin, CSV), never by agents.
    hardware_profile = models.ForeignKey(
        HardwareProfile,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="servers",
        help_text="overrides the profile matched by vendor and product",
    )
    rack = models.CharField(max_length=64, blank=True, default="", db_index=True)
    rack_position = models.PositiveIntegerField(null=True, blank=True)

    first_seen = models.DateTimeField(default=timezone.now)
    # Not indexed on purpose: every heartbeat moves it, and an indexed column makes each of
    # those UPDATEs a new row version in all of the table's indexes (no HOT update). A scan of
    # 25,000 rows for stale servers costs less (migration 0005 has the figures).
    last_seen = models.DateTimeField(null=True, blank=True)
    last_report = models.ForeignKey(
        "Report", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_report_hash = models.CharField(max_length=64, blank=True, default="")
    last_report_partial = models.BooleanField(
        default=False,
        help_text="the last applied report said it describes less than the machine has "
        "(a trimmed capture, nvidia-smi -L): it added and updated, and removed nothing",
    )
    last_report_partial_reason = models.CharField(max_length=500, blank=True, default="")
    placement_shape = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="the shape of the placement summary built from the facts last applied "
        "(placement.summaries); emptied whenever they change",
    )

    class Meta:
        ordering = ["hostname", "id"]

    def __str__(self) -> str:
        return self.hostname

    @property
    def state(self) -> str:
        """online / stale / offline from last_seen; list queries annotate the same rule."""
        return server_state_at(self.last_seen, timezone.now())


def server_state_at(last_seen, now) -> str:
    if last_seen is None:
        return ServerState.NEVER
    age = (now - last_seen).total_seconds()
    if age <= settings.ATLAS_SERVER_STALE_AFTER_S:
        return ServerState.ONLINE
    if age <= settings.ATLAS_SERVER_OFFLINE_AFTER_S:
        return ServerState.STALE
    return ServerState.OFFLINE


class GpuQuerySet(models.QuerySet):
    def healthy(self) -> GpuQuerySet:
        """GPUs `gpu_health` calls healthy, judged in SQL."""
        return self.exclude(UNHEALTHY)

    def unhealthy(self) -> GpuQuerySet:
        """GPUs `gpu_health` calls unhealthy (lost ones included), judged in SQL."""
        return self.filter(UNHEALTHY)


class Gpu(models.Model):
    """A GPU, identified by its UUID: it keeps its row and history when moved between servers."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=96, unique=True)
    uuid_synthetic = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=GpuStatus.choices, default=GpuStatus.OK)
    error = models.TextField(blank=True, default="")

    serial = models.CharField(max_length=128, blank=True, default="", db_index=True)
    name = models.CharField(max_length=128, blank=True, default="", db_index=True)
    board_part_number = models.CharField(max_length=128, blank=True, default="")
    architecture = models.CharField(max_length=64, blank=True, default="")
    compute_capability = models.CharField(max_length=16, blank=True, default="")
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    memory_total_bytes = models.BigIntegerField(null=True, blank=True)
    power_limit_w = models.FloatField(null=True, blank=True)
    vbios_version = models.CharField(max_length=64, blank=True, default="")
    numa_node = models.IntegerField(null=True, blank=True)
    cpu_affinity = models.CharField(max_length=128, blank=True, default="")
    persistence_mode = models.BooleanField(null=True, blank=True)

    mig_mode_current = models.BooleanField(null=True, blank=True)
    mig_mode_pending = models.BooleanField(null=True, blank=True)
    ecc_mode_current = models.BooleanField(null=True, blank=True)
    ecc_errors_corrected = models.BigIntegerField(null=True, blank=True)
    ecc_errors_uncorrected = models.BigIntegerField(null=True, blank=True)
    retired_pages = models.PositiveIntegerField(null=True, blank=True)
    retired_pages_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_correctable = models.PositiveIntegerField(null=True, blank=True)
    remapped_rows_uncorrectable = models.PositiveIntegerField(null=True, blank=True)
    remapped_rows_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_failure = models.BooleanField(null=True, blank=True)
    nvlinks = models.JSONField(default=list, blank=True)
    # The multi-node NVLink fabric (GB200 NVL72): GPUs with one cluster UUID and clique id
    # reach each other over NVLink across servers. Empty outside such a fabric.
    fabric_cluster_uuid = models.CharField(max_length=36, blank=True, default="", db_index=True)
    fabric_clique_id = models.PositiveBigIntegerField(null=True, blank=True)
    fabric_state = models.CharField(max_length=16, blank=True, default="")
    fabric_status = models.CharField(max_length=64, blank=True, default="")

    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    objects = GpuQuerySet.as_manager()

    class Meta:
        ordering = ["server_id", "index"]
        indexes = [
            models.Index(fields=["server", "status"]),
            # The GPU model dropdowns walk it (core/db/distinct.py).
            models.Index(
                fields=["name"], condition=~Q(status=GpuStatus.LOST), name="gpu_present_name"
            ),
            # The GPUs needing action start from these (health/action.py's candidates_q).
            models.Index(
                fields=["status"],
                condition=Q(status__in=[GpuStatus.LOST, GpuStatus.ERROR]),
                name="gpu_failing_status",
            ),
        ]

    def __str__(self) -> str:
        return f"GPU {self.index} {self.uuid}"

    @property
    def health(self) -> GpuHealth:
        return gpu_health({name: getattr(self, name) for name in HEALTH_FIELDS})

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig_mode_current)

    @property
    def nvlink_inactive_count(self) -> int:
        return sum(1 for link in self.nvlinks or [] if not link.get("active"))


class MigDevice(models.Model):
    """A MIG instance (GPU instance + compute instance) of one GPU. Never a node."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="mig_devices")
    uuid = models.CharField(max_length=128, unique=True)
    uuid_synthetic = models.BooleanField(default=False)
    # Null only where a partial source (`nvidia-smi -L`, modern form) did not print them.
    gpu_instance_id = models.PositiveIntegerField(null=True)
    compute_instance_id = models.PositiveIntegerField(null=True)
    profile = models.CharField(max_length=64, blank=True, default="", db_index=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    sm_count = models.PositiveIntegerField(null=True, blank=True)
    placement_start = models.PositiveIntegerField(null=True, blank=True)
    placement_size = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["gpu_id", "gpu_instance_id", "compute_instance_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu", "gpu_instance_id", "compute_instance_id"], name="mig_device_gi_ci"
            )
        ]

    def __str__(self) -> str:
        ids = (self.gpu_instance_id, self.compute_instance_id)
        gi, ci = ("?" if i is None else i for i in ids)
        return f"{self.profile or 'MIG'} GI {gi} CI {ci}"


class Nic(models.Model):
    """A network adapter. Switch and port come from the LLDP neighbours its agent hears
    (`fabric.lldp`), else from people (the admin, the API, a locations CSV), never from NVML.

    An RDMA device also carries its InfiniBand identity as its agent reads it from
    /sys/class/infiniband (GUIDs as 16 lower-case hex digits: the fabric binds adapters to
    servers by them), and any NIC the LLDP neighbours lldpd hears on it.
    """

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="nics")
    name = models.CharField(max_length=64)
    netdev = models.CharField(max_length=64, blank=True, default="")
    kind = models.CharField(max_length=16, choices=NicKind.choices, blank=True, default="")
    mac = models.CharField(max_length=64, blank=True, default="")
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    numa_node = models.IntegerField(null=True, blank=True)
    speed_mbps = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=32, blank=True, default="")
    addresses = models.JSONField(default=list, blank=True)
    switch = models.CharField(max_length=128, blank=True, default="", db_index=True)
    switch_port = models.CharField(max_length=64, blank=True, default="")

    node_guid = models.CharField(max_length=16, blank=True, default="", db_index=True)
    port_number = models.PositiveSmallIntegerField(null=True, blank=True)
    port_guid = models.CharField(max_length=16, blank=True, default="")
    port_guids = models.JSONField(default=list, blank=True, help_text="every port's GUID")
    lid = models.PositiveIntegerField(null=True, blank=True)
    rate = models.CharField(max_length=64, blank=True, default="", help_text="400 Gb/sec (4X NDR)")
    phys_state = models.CharField(max_length=32, blank=True, default="")
    link_layer = models.CharField(max_length=16, blank=True, default="")
    lldp_neighbors = models.JSONField(
        default=list, blank=True, help_text="switch name, chassis id, port, management address"
    )

    class Meta:
        ordering = ["server_id", "name"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="nic_server_name")]

    def __str__(self) -> str:
        return self.name


class Disk(models.Model):
    """A local disk (NVMe, SATA, SAS) as the server's agent reads it from /sys/block.

    Identified within its server by the kernel's name (nvme0n1); a disk the last report no
    longer lists is deleted, like a NIC: the serial is what follows a drive between servers.
    """

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="disks")
    name = models.CharField(max_length=64)
    model = models.CharField(max_length=128, blank=True, default="")
    serial = models.CharField(max_length=128, blank=True, default="", db_index=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    rotational = models.BooleanField(null=True, blank=True)
    transport = models.CharField(max_length=16, blank=True, default="", help_text="nvme, sata, sas")
    pci_bus_id = models.CharField(max_length=32, blank=True, default="")
    pcie_link_speed = models.CharField(max_length=16, blank=True, default="", help_text="16.0 GT/s")
    pcie_link_width = models.PositiveSmallIntegerField(null=True, blank=True)
    numa_node = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["server_id", "name"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="disk_server_name")]

    def __str__(self) -> str:
        return self.name


class Link(models.Model):
    """An interconnect path inside one server: GPU to GPU, GPU to NIC, or NIC to NIC.

    link_class is what `nvidia-smi topo -m` prints: NV<n> (n bonded NVLinks), PIX, PXB, PHB,
    NODE, SYS. Each pair is stored once: a GPU pair with gpu_a the lower index; a GPU-NIC
    pair as gpu_a and nic; a NIC pair (PIX: the two NICs share a PCIe switch) as nic_a and
    nic_b, lower name first, with no GPU. So every row with gpu_a is a GPU's link, and a
    reader of GPU links (`gpu_b` or `nic` set) never meets a NIC pair.
    """

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="links")
    gpu_a = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    gpu_b = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    nic = models.ForeignKey(Nic, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    nic_a = models.ForeignKey(
        Nic, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    nic_b = models.ForeignKey(
        Nic, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    link_class = models.CharField(max_length=8)
    nvlink_count = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["server_id", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(gpu_a__isnull=False)
                    & Q(nic_a__isnull=True)
                    & Q(nic_b__isnull=True)
                    & (
                        (Q(gpu_b__isnull=False) & Q(nic__isnull=True))
                        | (Q(gpu_b__isnull=True) & Q(nic__isnull=False))
                    )
                )
                | (
                    Q(gpu_a__isnull=True)
                    & Q(gpu_b__isnull=True)
                    & Q(nic__isnull=True)
                    & Q(nic_a__isnull=False)
                    & Q(nic_b__isnull=False)
                ),
                name="link_has_two_ends",
            )
        ]

    def __str__(self) -> str:
        if self.gpu_a_id is None:
            return f"nic{self.nic_a_id}-nic{self.nic_b_id} {self.link_class}"
        return f"{self.gpu_a_id}-{self.gpu_b_id or self.nic_id} {self.link_class}"


class Guest(models.Model):
    """A VM a hypervisor's agent lists (libvirt); its uuid is the VM's SMBIOS system UUID."""

    host = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="guests")
    uuid = models.CharField(max_length=64, db_index=True)
    name = models.CharField(max_length=128, blank=True, default="")
    state = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["host_id", "name"]
        constraints = [models.UniqueConstraint(fields=["host", "uuid"], name="guest_host_uuid")]

    def __str__(self) -> str:
        return self.name or self.uuid


class GpuClaim(models.Model):
    """A GPU or MIG device UUID that a server's last report lists while another server holds it.

    An agent token writes only its own server: while the holder is live and its own latest
    report still lists the UUID, the claimant's report changes nothing of the holder and the
    claim is kept here (reconciliation raises "GPU reported by two servers" from it). The
    claimant's own next apply settles it: the move becomes real once the holder stops listing
    the UUID or goes offline; the claim ends when the claimant stops listing it.
    """

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="gpu_claims")
    uuid = models.CharField(max_length=128)
    gpu = models.ForeignKey(
        Gpu, on_delete=models.CASCADE, related_name="+", help_text="the row its holder keeps"
    )
    mig_device = models.ForeignKey(
        MigDevice,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="set when the claimed UUID is a MIG device's",
    )
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["server_id", "uuid"]
        constraints = [
            models.UniqueConstraint(fields=["server", "uuid"], name="gpu_claim_server_uuid")
        ]

    def __str__(self) -> str:
        return f"{self.uuid} claimed by server {self.server_id}"


class Revision(models.Model):
    """A counter per data set ("inventory", "nodes") that moves when that data changes.

    Higher layers compare it with what they last processed (reconciliation, fleet figures),
    so 25,000 reports a minute coalesce into one reconcile instead of 25,000.
    """

    name = models.CharField(max_length=32, primary_key=True)
    value = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.name}@{self.value}"


class AgentToken(models.Model):
    """A credential that may only post reports, bound to the first server identity it reports.

    Only a SHA-256 of the key is stored; the key is shown once, when created.
    """

    name = models.CharField(max_length=200, blank=True, default="")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="first characters, to recognise a token")
    identity = models.CharField(
        max_length=300,
        null=True,
        blank=True,
        unique=True,
        help_text="the server identity this token is bound to; cleared by an admin to re-bind",
    )
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_tokens"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"{self.name or 'agent token'} ({self.prefix}…)"


class UserToken(models.Model):
    """A person's (or a script's) API key: `Authorization: Token <key>` acts as that user.

    Stored like an agent token, as a SHA-256 of the key, shown once when created; it never
    posts reports (those take agent tokens) and goes with the user's own permissions.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=200, blank=True, default="", help_text="what it is for")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="first characters, to recognise a token")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id", "name", "id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name or 'API token'} of {self.user} ({self.prefix}…)"


class EnrollmentToken(models.Model):
    """A secret many agents present once each to get their own agent token (fleet installs).

    Stored as a SHA-256 like every token; it never posts a report. It is spent after
    `uses_allowed` enrollments, refused after `expires_at` or once revoked.
    `allow_reenroll` lets it replace a server's live agent token (a reinstalled server).
    """

    name = models.CharField(max_length=200, blank=True, default="", help_text="what it is for")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="first characters, to recognise a token")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="enrollment_tokens",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="empty: never expires")
    uses_allowed = models.PositiveIntegerField(default=1, help_text="enrollments it may make")
    uses = models.PositiveIntegerField(default=0, help_text="enrollments made")
    revoked_at = models.DateTimeField(null=True, blank=True)
    allow_reenroll = models.BooleanField(
        default=False,
        help_text="may replace the live agent token of a server already enrolled (reinstalls)",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(uses__lte=models.F("uses_allowed")),
                name="enrollment_token_uses_within_allowed",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name or 'enrollment token'} ({self.prefix}…)"


class Enrollment(models.Model):
    """One use of an enrollment token: who enrolled, as which server, with which agent token."""

    token = models.ForeignKey(EnrollmentToken, on_delete=models.CASCADE, related_name="enrollments")
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="enrollments"
    )
    agent_token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="enrollments"
    )
    identity = models.CharField(max_length=300, help_text="the server identity it enrolled as")
    hostname = models.CharField(max_length=253)
    system_uuid = models.CharField(max_length=64, blank=True, default="")
    machine_id = models.CharField(max_length=64, blank=True, default="")
    kubernetes_node_name = models.CharField(max_length=253, blank=True, default="")
    slurm_node_name = models.CharField(max_length=253, blank=True, default="")
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    replaced_token = models.BooleanField(
        default=False, help_text="a re-enrollment: the server's previous agent token was revoked"
    )
    enrolled_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-enrolled_at", "-id"]

    def __str__(self) -> str:
        return f"{self.hostname} enrolled {self.enrolled_at:%Y-%m-%d %H:%M}"


class Report(models.Model):
    """A raw agent report as received; applied to the inventory by `report_apply`."""

    token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="reports"
    )
    identity = models.CharField(max_length=300, db_index=True)
    server = models.ForeignKey(
        Server, null=True, blank=True, on_delete=models.SET_NULL, related_name="reports"
    )
    payload = models.JSONField()
    content_hash = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=ReportStatus.choices, default=ReportStatus.PENDING
    )
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "received_at"])]

    def __str__(self) -> str:
        return f"report {self.pk} ({self.status})"


class ChangeEvent(models.Model):
    """Something about a server's hardware that changed between two reports."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="changes")
    gpu = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    report = models.ForeignKey(
        Report, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    kind = models.CharField(max_length=32, choices=ChangeKind.choices, db_index=True)
    summary = models.CharField(max_length=500)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["server", "-created_at"])]

    def __str__(self) -> str:
        return self.summary
