"""ServerPlacement now belongs to the placement app (placement 0001): forgotten here, in
state only, so its table `topology_serverplacement` stays with every row."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("topology", "0003_placement_shape"),
        ("placement", "0001_server_placement"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ServerPlacement")],
            database_operations=[],
        ),
    ]
