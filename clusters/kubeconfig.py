"""Where a cluster's kubeconfig may live: inside ATLAS_KUBECONFIG_DIR, nowhere else.

A kubeconfig path is set by staff through the API or the admin, and the worker opens it;
unconfined, it would let them make the worker read any file it can (a key, another
service's credentials) and try it as a kubeconfig. So a path must resolve, after `..` and
symbolic links, to a file inside the configured directory; a relative path is taken inside
it. The check runs when the path is saved (a field-level 400 in the API, a form error in the
admin) and again before each pull, since a link inside the directory can change later.
Messages name the path and the directory, never what a file holds.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError


class KubeconfigPathRefused(ValueError):
    """The path resolves outside the kubeconfig directory (or cannot be resolved)."""


def kubeconfig_path_resolve(path: str, directory: Path) -> Path:
    """The real path of `path` (relative: inside `directory`) if it lies inside `directory`.

    The file need not exist yet (it may be copied in after the cluster is registered); the
    components that do exist are resolved, so a link anywhere on the way counts where it points.
    """
    root = Path(directory).resolve()
    try:
        resolved = (root / path).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, a link loop
        raise KubeconfigPathRefused(f"{path!r} cannot be resolved ({type(exc).__name__})") from None
    if resolved == root or not resolved.is_relative_to(root):
        raise KubeconfigPathRefused(
            f"{path!r} is not a file inside the kubeconfig directory {root} (ATLAS_KUBECONFIG_DIR)"
        )
    return resolved


def kubeconfig_directory() -> Path:
    return Path(settings.ATLAS_KUBECONFIG_DIR)


def validate_kubeconfig_path(value: str) -> None:
    """Model-field validator: the API's serializer and the admin's form both run it."""
    if not value:
        return  # no path: the pull uses the worker's own $KUBECONFIG or ~/.kube/config
    try:
        kubeconfig_path_resolve(value, kubeconfig_directory())
    except KubeconfigPathRefused as exc:
        raise ValidationError(str(exc), code="outside_kubeconfig_dir") from None


def kubeconfig_for_pull(value: str) -> str | None:
    """The resolved path to load for a pull (None: the client's default lookup); refuses
    a path outside the directory, however it got into the database."""
    if not value:
        return None
    return str(kubeconfig_path_resolve(value, kubeconfig_directory()))
