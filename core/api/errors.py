"""API errors: every failure answers JSON with the fields at fault, never an HTML 500 page."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from core.db.bounds import unavailable


def exception_handler(exc, context):
    """DRF's, plus 503 with Retry-After when the database is away or the statement timed out
    (core/db/bounds.py), instead of the 500 an unhandled OperationalError would be."""
    reason = unavailable(exc)
    if reason is not None:
        set_rollback()
        return Response(
            {"detail": reason.detail},
            status=503,
            headers={"Retry-After": str(reason.retry_after_s)},
        )
    return drf_exception_handler(exc, context)


@extend_schema_field(
    serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
)
class ErrorsField(serializers.DictField):
    pass


class ErrorSerializer(serializers.Serializer):
    """An error answer: `detail`, and for bad input the messages by field path in `errors`.

    Serializer validation answers name the fields at the top level instead (`{"name": [...]}`),
    as DRF does; both shapes fit this schema.
    """

    detail = serializers.CharField(required=False)
    # The metaclass moves declared fields off the class, so `Serializer.errors` (a property
    # in the stubs) is not overridden at run time.
    errors = ErrorsField(required=False)  # type: ignore[assignment]
