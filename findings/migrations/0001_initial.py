"""Finding moves from clusters/ to findings/ with its table: state only, no row touched.

The table keeps its name (`clusters_finding`), its indexes and its constraint; this creates the
model in this app's state, integrations.0002 points the delivery's foreign key at it, and
clusters.0010 removes the model from the clusters app's state.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('clusters', '0009_node_cpus_effective'),
        ('inventory', '0008_mig_instance_ids_unknown_in_partial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Finding',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('type', models.CharField(choices=[('node_without_server', 'Node without a server'), ('server_without_node', 'Server in no scheduler'), ('gpu_count_mismatch', 'GPU count mismatch'), ('mig_mismatch', 'MIG mismatch'), ('mig_pending_reboot', 'MIG mode pending a reboot'), ('gpu_model_mismatch', 'GPU model mismatch'), ('stale_agent', 'Stale agent on a ready node'), ('duplicate_identity', 'Duplicate identity'), ('driver_skew', 'Driver or CUDA version skew'), ('unhealthy_gpu', 'Unhealthy GPU on a schedulable node'), ('node_unavailable', 'Node unavailable, hardware healthy'), ('gpu_not_in_nvml', 'GPU on the PCI bus, not in NVML'), ('below_profile', 'Fewer GPUs than the hardware profile'), ('duplicate_gpu', 'GPU reported by two servers'), ('gpu_fatal_xid', 'Fatal Xid on a GPU'), ('gpu_repeated_failure', 'GPU failing again'), ('slot_repeated_failure', 'Slot failing across replacements'), ('server_repeated_failure', 'Server whose GPUs keep failing'), ('gpu_row_remap_failure', 'Row remapping failed'), ('gpu_memory_repair_pending', 'Row remap or page retirement pending'), ('gpu_uncorrected_ecc', 'Uncorrected ECC errors'), ('gpu_pcie_degraded', 'PCIe link narrower or slower than its best'), ('gpu_recovery_action', 'The driver asks for a reset or reboot'), ('fabric_link_degraded', 'Link slower or narrower than its peers'), ('fabric_port_gone', 'A port that was up is gone'), ('fabric_wrong_rail', "Server NIC on another rail's leaf"), ('fabric_topology_mismatch', 'Scheduler topology disagrees with the fabric'), ('fabric_server_absent', "GPU server absent from its peers' fabric"), ('fabric_server_unbalanced', 'Less network bandwidth per GPU than its peers')], max_length=32)),
                        ('severity', models.CharField(choices=[('critical', 'Critical'), ('warning', 'Warning'), ('info', 'Information')], max_length=16)),
                        ('subject', models.CharField(max_length=400)),
                        ('message', models.TextField()),
                        ('details', models.JSONField(blank=True, default=dict)),
                        ('action', models.TextField(blank=True, default='', help_text='the next step to take, in words')),
                        ('first_seen', models.DateTimeField(default=django.utils.timezone.now)),
                        ('last_seen', models.DateTimeField(default=django.utils.timezone.now)),
                        ('resolved_at', models.DateTimeField(blank=True, null=True)),
                        ('reopened_count', models.PositiveIntegerField(default=0)),
                        ('ack_at', models.DateTimeField(blank=True, null=True)),
                        ('ack_reason', models.CharField(blank=True, default='', max_length=500)),
                        ('ack_occurrence', models.PositiveIntegerField(blank=True, null=True)),
                        ('silenced_at', models.DateTimeField(blank=True, null=True)),
                        ('silenced_until', models.DateTimeField(blank=True, null=True)),
                        ('silence_reason', models.CharField(blank=True, default='', max_length=500)),
                        ('ack_withdrawn_at', models.DateTimeField(blank=True, null=True)),
                        ('silence_lifted_at', models.DateTimeField(blank=True, null=True)),
                        ('ack_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('ack_withdrawn_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('cluster', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='findings', to='clusters.cluster')),
                        ('gpu', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='findings', to='inventory.gpu')),
                        ('node', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='findings', to='clusters.node')),
                        ('server', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='findings', to='inventory.server')),
                        ('silence_lifted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('silenced_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'clusters_finding',
                        'ordering': ['resolved_at', '-last_seen', 'id'],
                        'indexes': [models.Index(fields=['resolved_at', 'severity'], name='clusters_fi_resolve_0181e7_idx'), models.Index(fields=['type', 'resolved_at'], name='clusters_fi_type_f36732_idx')],
                        'constraints': [models.UniqueConstraint(fields=('type', 'subject'), name='finding_type_subject')],
                    },
                ),
            ],
        ),
    ]
