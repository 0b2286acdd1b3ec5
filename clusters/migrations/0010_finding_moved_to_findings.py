"""Finding now lives in findings/ (findings.0001), its table kept: removed from this app's
state only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0009_node_cpus_effective"),
        ("findings", "0001_initial"),
        ("integrations", "0002_delivery_finding_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="Finding")],
        ),
    ]
