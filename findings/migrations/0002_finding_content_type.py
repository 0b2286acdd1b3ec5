"""The finding's content type follows the model (clusters -> findings), so admin permissions
given on findings (`clusters.change_finding` before) keep holding as `findings.*_finding`."""

from django.db import migrations


def _move(apps, schema_editor, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    old = ContentType.objects.using(db).filter(app_label=source, model="finding")
    if not old.exists():
        return  # a fresh database: post_migrate creates the findings one
    # One already made under the new label (post_migrate ran first) holds no permission
    # anybody was given: the old one, with its grants, takes its place.
    ContentType.objects.using(db).filter(app_label=target, model="finding").delete()
    old.update(app_label=target)


def forwards(apps, schema_editor):
    _move(apps, schema_editor, "clusters", "findings")


def backwards(apps, schema_editor):
    _move(apps, schema_editor, "findings", "clusters")


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0010_finding_moved_to_findings"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("findings", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
