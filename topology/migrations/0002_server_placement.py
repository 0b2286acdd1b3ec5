import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0004_fabric_facts_and_disks"),
        ("topology", "0001_rendered_figure"),
    ]

    operations = [
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
                ("gpus", models.TextField(help_text="JSON [[id, index, name, memory, numa, state], ...]")),
                ("links", models.TextField(help_text='the one link class (NV18), "" for none, or JSON {"classes", "pairs"} when mixed')),
                ("migs", models.TextField(help_text="JSON [[uuid, gpu_id, profile, memory], ...]")),
                ("usable", models.PositiveIntegerField(help_text="GPUs healthy and outside MIG mode")),
                ("known", models.PositiveIntegerField(help_text="GPUs not lost")),
                ("built_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={"ordering": ["server_id"]},
        ),
    ]
