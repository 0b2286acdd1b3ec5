"""API permissions shared by the apps."""

from __future__ import annotations

from rest_framework import permissions


class IsStaffOrReadOnly(permissions.BasePermission):
    """People read; only staff change what people own (rack, clusters, fabrics)."""

    def has_permission(self, request, view) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return bool(request.user and request.user.is_staff)
