"""API permissions shared by the apps."""

from __future__ import annotations

from rest_framework import permissions
from rest_framework.decorators import action


class IsStaffOrReadOnly(permissions.BasePermission):
    """People read; only staff change what people own (rack, clusters, fabrics)."""

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return bool(request.user and request.user.is_staff)


def staff_post_action(**kwargs):
    """A POST action on one object (or, `detail=False`, on many), for staff only. A fresh
    `action` each time: DRF keeps the decorator's kwargs on the function, so one shared
    decorator would mix the actions' names."""
    kwargs.setdefault("detail", True)
    return action(
        methods=["post"],
        permission_classes=[permissions.IsAuthenticated, permissions.IsAdminUser],
        **kwargs,
    )
