"""Server placement summaries gain a shape digest, and their small columns come first.

The table is made again: summaries are derived data, rebuilt by the beat task within
a minute or at once by `manage.py placement_summaries`; until then the reads take the rows.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0004_fabric_facts_and_disks"),
        ("topology", "0002_server_placement"),
    ]

    operations = [
        migrations.DeleteModel(name="ServerPlacement"),
        migrations.CreateModel(
            name="ServerPlacement",
            fields=[
                (
                    "server",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="placement",
                        serialize=False,
                        to="inventory.server",
                    ),
                ),
                ("stamp", models.CharField(max_length=64)),
                (
                    "usable",
                    models.PositiveIntegerField(help_text="GPUs healthy and outside MIG mode"),
                ),
                ("known", models.PositiveIntegerField(help_text="GPUs not lost")),
                ("built_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "shape",
                    models.CharField(
                        default="",
                        help_text="a digest of the summary without ids and UUIDs: servers "
                        "alike share it",
                        max_length=32,
                    ),
                ),
                (
                    "gpus",
                    models.TextField(
                        default="", help_text="JSON [[id, index, name, memory, numa, state], ...]"
                    ),
                ),
                (
                    "links",
                    models.TextField(
                        default="",
                        help_text='the one link class (NV18), "" for none, or JSON {"classes", '
                        '"pairs"} when mixed',
                    ),
                ),
                (
                    "migs",
                    models.TextField(
                        default="", help_text="JSON [[uuid, gpu_id, profile, memory], ...]"
                    ),
                ),
            ],
            options={"ordering": ["server_id"]},
        ),
    ]
