"""ServerPlacement moves from the topology app to placement, its table kept.

State only: the table `topology_serverplacement` stays as topology's migrations made it
(topology 0004 forgets the model), and its content type follows the model.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def content_type_to(app_label: str, old: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        if not ContentType.objects.using(db).filter(
            app_label=app_label, model="serverplacement"
        ).exists():
            ContentType.objects.using(db).filter(app_label=old, model="serverplacement").update(
                app_label=app_label
            )

    return move


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("inventory", "0004_fabric_facts_and_disks"),
        ("topology", "0003_placement_shape"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
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
                            models.PositiveIntegerField(
                                help_text="GPUs healthy and outside MIG mode"
                            ),
                        ),
                        ("known", models.PositiveIntegerField(help_text="GPUs not lost")),
                        ("built_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "shape",
                            models.CharField(
                                default="",
                                help_text="a digest of the summary without ids and UUIDs: "
                                "servers alike share it",
                                max_length=32,
                            ),
                        ),
                        (
                            "gpus",
                            models.TextField(
                                default="",
                                help_text="JSON [[id, index, name, memory, numa, state], ...]",
                            ),
                        ),
                        (
                            "links",
                            models.TextField(
                                default="",
                                help_text='the one link class (NV18), "" for none, or JSON '
                                '{"classes", "pairs"} when mixed',
                            ),
                        ),
                        (
                            "migs",
                            models.TextField(
                                default="", help_text="JSON [[uuid, gpu_id, profile, memory], ...]"
                            ),
                        ),
                    ],
                    options={"db_table": "topology_serverplacement", "ordering": ["server_id"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            content_type_to("placement", "topology"),
            content_type_to("topology", "placement"),
            elidable=True,
        ),
    ]
