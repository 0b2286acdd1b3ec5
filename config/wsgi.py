"""WSGI entry point for gunicorn (and runserver): the web process.

It marks the process as a web process before the app loads, so its database connections run
under ATLAS_DB_STATEMENT_TIMEOUT_MS (core/db/bounds.py); workers and commands never import it.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from core.db.bounds import enable_for_web  # noqa: E402  (after setup: it reads settings)

enable_for_web()
