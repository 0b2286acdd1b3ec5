"""Settings, every knob from the environment.

The embedded default (no environment at all) is what `make run` uses: a SQLite file under
`var/`, tasks run in-process, DEBUG on. Production sets DATABASE_URL (PostgreSQL),
REDIS_URL or CELERY_BROKER_URL, DJANGO_SECRET_KEY, DJANGO_DEBUG=0, DJANGO_ALLOWED_HOSTS.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ATLAS_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
    SECRET_KEY = "cluster-atlas-insecure-development-key"
ALLOWED_HOSTS = [
    h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h
]
CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally: dashboards run in closed networks
    "inventory",
    "clusters",
    "topology",
    "health",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent agents on the embedded default: wait for the writer instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file (not :memory:) so a Celery worker started by the integration tests shares it;
    # one per test process, so parallel runs never write the same file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("ATLAS_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every start without it

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: unauthenticated API calls get 401 with WWW-Authenticate, not 403.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "inventory.api.pagination.AtlasPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "inventory.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Cluster Atlas API",
    "DESCRIPTION": "Inventory of GPU clusters: servers, scheduler nodes, GPUs, MIG devices, "
    "interconnect, findings, placement and failure domains.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery. No broker configured: tasks run in-process (the embedded default).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL") or ""
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
if CELERY_TASK_ALWAYS_EAGER:
    CELERY_BROKER_URL = "memory://localhost/"  # never used for sending
CELERY_TASK_EAGER_PROPAGATES = env_bool("CELERY_TASK_EAGER_PROPAGATES", False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 270)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Enqueueing must not hang a request when Redis is away: fail fast, the sweep catches up.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BEAT_SCHEDULE = {
    "sweep-pending-reports": {
        "task": "inventory.tasks.sweep_pending_reports",
        "schedule": env_int("ATLAS_SWEEP_INTERVAL_S", 60),
    },
    # Reports coalesce: reconcile once after a burst, not once per report.
    "reconcile-if-changed": {
        "task": "clusters.tasks.reconcile",
        "schedule": env_int("ATLAS_RECONCILE_INTERVAL_S", 15),
    },
    "sync-due-clusters": {
        "task": "clusters.tasks.sync_due_clusters",
        "schedule": env_int("ATLAS_SYNC_TICK_S", 30),
    },
    # Records the events and counters of reports applied since the last run.
    "record-health": {
        "task": "health.tasks.record_health",
        "schedule": env_int("ATLAS_HEALTH_INTERVAL_S", 10),
    },
    "prune-health": {"task": "health.tasks.prune_health", "schedule": 3600},
    # Returns at once when nothing changed since the last render.
    "render-fleet-figures": {
        "task": "topology.tasks.render_fleet_figures",
        "schedule": env_int("ATLAS_FIGURE_RENDER_INTERVAL_S", 30),
    },
}

# Cluster Atlas knobs.
ATLAS_SERVER_STALE_AFTER_S = env_int("ATLAS_SERVER_STALE_AFTER_S", 300)
ATLAS_SERVER_OFFLINE_AFTER_S = env_int("ATLAS_SERVER_OFFLINE_AFTER_S", 3600)
ATLAS_REPORT_MAX_BYTES = env_int("ATLAS_REPORT_MAX_BYTES", 2 * 1024 * 1024)
ATLAS_REPORT_RETENTION = env_int("ATLAS_REPORT_RETENTION", 20)
ATLAS_PENDING_REPORT_GRACE_S = env_int("ATLAS_PENDING_REPORT_GRACE_S", 30)
ATLAS_SNAPSHOT_MAX_BYTES = env_int("ATLAS_SNAPSHOT_MAX_BYTES", 256 * 1024 * 1024)
# GPU health: repeats of one event closer than this are one episode; a re-sent event batch is
# recognised this long; events and counter history are kept this long.
ATLAS_HEALTH_EPISODE_GAP_S = env_int("ATLAS_HEALTH_EPISODE_GAP_S", 3600)
ATLAS_HEALTH_RECEIPT_DAYS = env_int("ATLAS_HEALTH_RECEIPT_DAYS", 30)
ATLAS_HEALTH_RETENTION_DAYS = env_int("ATLAS_HEALTH_RETENTION_DAYS", 730)
# Each upload endpoint enforces its own limit from Content-Length (413 with a clear message).
DATA_UPLOAD_MAX_MEMORY_SIZE = None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("ATLAS_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "celery.app.trace": {"level": os.environ.get("ATLAS_TASK_LOG_LEVEL", "WARNING")},
    },
}
