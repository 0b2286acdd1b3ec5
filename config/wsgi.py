"""WSGI entry point for gunicorn (and runserver): the web process.

It marks the process as a web process once the app loads, so its database connections run
under ATLAS_DB_STATEMENT_TIMEOUT_MS (core/db/bounds.py); workers and commands never import it.
A body refused unread (core/api/body_limit.py) closes its connection (`close_after_refusal`).
Its repeated heartbeats are answered from memory, their last_seen written in bulk every
ATLAS_HEARTBEAT_FLUSH_S (inventory/services/heartbeat.py).
"""

import os

from django.core.wsgi import get_wsgi_application

from core.api.body_limit import close_after_refusal

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = close_after_refusal(get_wsgi_application())

from core.db.bounds import enable_for_web  # noqa: E402  (after setup: it reads settings)
from inventory.services import heartbeat_memory_enable  # noqa: E402

enable_for_web()
heartbeat_memory_enable()  # repeated heartbeats answered from memory, last_seen in bulk
