"""WSGI entry point for gunicorn."""

import os

from django.core.wsgi import get_wsgi_application

from core.api.body_limit import close_after_refusal

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = close_after_refusal(get_wsgi_application())
