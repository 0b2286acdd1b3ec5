"""Settings, every knob from the environment.

The embedded default (no environment at all) is what `make run` uses: a SQLite file under
`var/`, tasks run in-process, beat's schedule run by `manage.py runschedule`, DEBUG on.
Production sets DATABASE_URL (PostgreSQL), REDIS_URL or CELERY_BROKER_URL,
DJANGO_SECRET_KEY, DJANGO_DEBUG=0, DJANGO_ALLOWED_HOSTS.
"""

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.csp import content_security_policy

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
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally: dashboards run in closed networks
    "csp",
    "core",
    "inventory",
    "findings",
    "clusters",
    "fabric",
    "health",
    "workloads",
    "topology",
    "placement",
    "integrations",
    "demo",
]

MIDDLEWARE = [
    # /healthz and /readyz for probes, before everything (core/probes.py: a probe over plain
    # HTTP to the pod's address must not meet ALLOWED_HOSTS or the HTTPS redirect).
    "core.probes.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Counts the reports endpoint's answers for /metrics (off while ATLAS_METRICS_TOKEN is
    # unset); before the heartbeat middleware, so heartbeats are counted too.
    "integrations.middleware.ReportOutcomeMiddleware",
    # Agents' heartbeats, answered before the rest (sessions, CSRF, CSP: not for agents).
    "inventory.api.middleware.AgentHeartbeatMiddleware",
    # Bodies over their endpoint's limit refused unread, before any view or CSRF check reads
    # them (core/api/body_limit.py); after the answer counter, so 413s are counted.
    "core.api.body_limit.BodyLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "core.not_found.NotFoundPageMiddleware",  # the app's 404 page under DEBUG too
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
        # A kept connection the server dropped (restart, failover, idle kill) is checked once
        # per request and replaced, instead of failing that request with a 500.
        conn_health_checks=env_bool("DATABASE_CONN_HEALTH_CHECKS", True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's, with an is_usable() that tells the truth: a closed connection is replaced
    # (health checks, the heartbeat middleware's retry), not a 500 (core/db/sqlite3/base.py).
    DATABASES["default"]["ENGINE"] = "core.db.sqlite3"
    # Concurrent agents on the embedded default: wait for the writer instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A file (not :memory:) so a Celery worker started by the integration tests shares it;
    # one per test process, so parallel runs never write the same file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    VAR_DIR.mkdir(parents=True, exist_ok=True)
# Web requests' statements are cancelled after this long (PostgreSQL; 0: off); the request
# answers 503 with Retry-After. Web processes only (config/wsgi.py): workers' and commands'
# passes are long (core/db/bounds.py).
ATLAS_DB_STATEMENT_TIMEOUT_MS = env_int("ATLAS_DB_STATEMENT_TIMEOUT_MS", 30000)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Security: TLS, cookies and the Content-Security-Policy. The production values are in
# README ("Production shape"); `manage.py check --deploy` passes with them
# (tests/config/test_security.py).
# Behind a proxy that terminates TLS: the header it sets, e.g. HTTP_X_FORWARDED_PROTO (only
# when the proxy always sets or overwrites it, else a client could claim https).
_proxy_header = os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
if _proxy_header:
    _proxy_header = _proxy_header.upper().replace("-", "_")
    if not _proxy_header.startswith("HTTP_"):
        _proxy_header = "HTTP_" + _proxy_header
    SECURE_PROXY_SSL_HEADER = (_proxy_header, "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Cookies only over HTTPS once DEBUG is off; a plain-HTTP deployment sets these to 0.
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", not DEBUG)
# The pages load only this server's scripts, styles and images (config/csp.py says why and
# what plotly.js needs). ATLAS_CSP_REPORT_ONLY=1 sends it as
# Content-Security-Policy-Report-Only instead: violations are reported (in the console, and
# to ATLAS_CSP_REPORT_URI when set), nothing is blocked.
_csp = content_security_policy(report_uri=os.environ.get("ATLAS_CSP_REPORT_URI", ""))
if env_bool("ATLAS_CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _csp
else:
    CONTENT_SECURITY_POLICY = _csp

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
        # People's tokens are stored hashed (inventory.UserToken), like agents'.
        "inventory.api.authentication.UserTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.AtlasPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    # Every JSON body through the strict decoder (no NaN, bounded nesting, no NUL/surrogates).
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.AtlasAutoSchema",
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
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
    "ENUM_NAME_OVERRIDES": {
        "ClusterKindEnum": "clusters.choices.ClusterKind",
        "GpuStatusEnum": "inventory.choices.GpuStatus",
        "SnapshotStatusEnum": "clusters.choices.SnapshotStatus",
        "FabricSnapshotStatusEnum": "fabric.choices.SnapshotStatus",
        "HealthEventKindEnum": "health.choices.EventKind",
        "NicKindEnum": "inventory.choices.NicKind",
        "ChangeKindEnum": "inventory.choices.ChangeKind",
        "FabricKindEnum": "fabric.choices.FabricKind",
        "FabricNodeKindEnum": "fabric.choices.NodeKind",
        "WebhookEventEnum": "integrations.choices.WebhookEvent",
        "DeliveryStatusEnum": "integrations.choices.DeliveryStatus",
    },
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
# Run by beat with a broker, by `manage.py runschedule` (core/schedule.py) without one.
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
    # Large snapshots left pending while the broker was away.
    "sweep-pending-snapshots": {
        "task": "clusters.tasks.sweep_pending_snapshots",
        "schedule": env_int("ATLAS_SWEEP_INTERVAL_S", 60),
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
    # Health events named by the workload on their GPU, for jobs that arrive after the event.
    "name-event-holders": {"task": "workloads.tasks.name_event_holders", "schedule": 60},
    # Health findings whose window passed resolve without a report.
    "sync-health-findings": {
        "task": "health.tasks.sync_health_findings",
        "schedule": env_int("ATLAS_HEALTH_FINDINGS_INTERVAL_S", 60),
    },
    # Returns at once when nothing changed since the last render.
    "render-fleet-figures": {
        "task": "topology.tasks.render_fleet_figures",
        "schedule": env_int("ATLAS_FIGURE_RENDER_INTERVAL_S", 30),
    },
    # Per-server placement summaries follow applied reports (stale ones are read from rows).
    "refresh-placement-summaries": {
        "task": "placement.tasks.refresh_placement_summaries",
        "schedule": 30,
    },
    # How well each running workload is placed; only those whose GPUs or start changed.
    "judge-workloads": {
        "task": "placement.tasks.judge_workloads",
        "schedule": env_int("ATLAS_WORKLOAD_JUDGE_INTERVAL_S", 120),
    },
    # Fabric adapters bind to servers that reported after the fabric's last snapshot.
    "rebind-fabrics": {
        "task": "fabric.tasks.rebind_fabrics",
        "schedule": env_int("ATLAS_FABRIC_REBIND_INTERVAL_S", 300),
    },
    # Fabric findings follow servers that came, went or changed GPUs between snapshots.
    "fabric-findings": {
        "task": "fabric.tasks.sync_all_fabric_findings",
        "schedule": env_int("ATLAS_FABRIC_FINDINGS_INTERVAL_S", 300),
    },
    # Open findings to Alertmanager (re-sent while open), resolved ones with their endsAt;
    # returns at once while ATLAS_ALERTMANAGER_URL is unset.
    "push-alerts": {
        "task": "integrations.tasks.push_alerts",
        "schedule": env_int("ATLAS_ALERT_INTERVAL_S", 60),
    },
    # Findings raised or resolved since the last scan become webhook deliveries.
    "scan-webhook-outbox": {
        "task": "integrations.tasks.scan_webhook_outbox",
        "schedule": env_int("ATLAS_WEBHOOK_SCAN_INTERVAL_S", 15),
    },
    # Deliveries whose next attempt is due (the first attempt is enqueued by the scan).
    "retry-webhook-deliveries": {
        "task": "integrations.tasks.send_due_deliveries",
        "schedule": env_int("ATLAS_WEBHOOK_SCAN_INTERVAL_S", 15),
    },
    "prune-webhook-deliveries": {"task": "integrations.tasks.prune_deliveries", "schedule": 3600},
    # What the GPUs say (processes, the kubelet's devices) of reports applied since the last
    # run, process facts of silent servers dropped, then the workloads findings.
    "record-workload-facts": {
        "task": "workloads.tasks.record_workload_facts",
        "schedule": 15,
    },
    # The workloads findings again: GPUs needing action and reconciliation move without reports.
    "sync-workload-findings": {"task": "workloads.tasks.sync_workload_findings", "schedule": 60},
    # Ended workloads past ATLAS_WORKLOAD_RETENTION_DAYS summed and deleted.
    "summarise-workloads": {"task": "workloads.tasks.summarise_workloads", "schedule": 86400},
}

# Cluster Atlas knobs.
ATLAS_SERVER_STALE_AFTER_S = env_int("ATLAS_SERVER_STALE_AFTER_S", 300)
ATLAS_SERVER_OFFLINE_AFTER_S = env_int("ATLAS_SERVER_OFFLINE_AFTER_S", 3600)
# A web process answers a token's repeated heartbeats from memory this long (so a token
# revoked through another process is refused within it), and writes their last_seen in bulk
# this often (so last_seen is at most this far behind): inventory/services/heartbeat.py.
# ATLAS_HEARTBEAT_CACHE_S=0: every heartbeat one statement that writes last_seen itself.
ATLAS_HEARTBEAT_CACHE_S = env_int("ATLAS_HEARTBEAT_CACHE_S", 5)
ATLAS_HEARTBEAT_FLUSH_S = env_int("ATLAS_HEARTBEAT_FLUSH_S", 5)
ATLAS_REPORT_MAX_BYTES = env_int("ATLAS_REPORT_MAX_BYTES", 2 * 1024 * 1024)
ATLAS_REPORT_RETENTION = env_int("ATLAS_REPORT_RETENTION", 20)
ATLAS_PENDING_REPORT_GRACE_S = env_int("ATLAS_PENDING_REPORT_GRACE_S", 30)
# A cluster's kubeconfig_path must be a file inside this directory (clusters/kubeconfig.py).
ATLAS_KUBECONFIG_DIR = Path(os.environ.get("ATLAS_KUBECONFIG_DIR", VAR_DIR / "kubeconfigs"))
# Open /api/schema/ and /api/docs/ to anonymous callers (by default: signed-in people only).
ATLAS_PUBLIC_API_SCHEMA = env_bool("ATLAS_PUBLIC_API_SCHEMA", False)
# After a failed hand-off to the broker, reports skip it this long (they stay pending for the
# sweep), so a broker that is down costs no request its connect timeouts.
ATLAS_BROKER_RETRY_AFTER_S = env_int("ATLAS_BROKER_RETRY_AFTER_S", 15)
ATLAS_SNAPSHOT_MAX_BYTES = env_int("ATLAS_SNAPSHOT_MAX_BYTES", 256 * 1024 * 1024)
# Larger snapshots are stored and applied by a worker (202 + status URL), smaller ones at once.
ATLAS_SNAPSHOT_SYNC_MAX_BYTES = env_int("ATLAS_SNAPSHOT_SYNC_MAX_BYTES", 4 * 1024 * 1024)
ATLAS_SNAPSHOT_RETENTION = env_int("ATLAS_SNAPSHOT_RETENTION", 20)
# A node snapshot that would mark half or more of a cluster's live nodes gone, or more than
# this many at once, is held for confirmation (the same node set again, or ?confirm=shrink).
ATLAS_SNAPSHOT_MAX_GONE_NODES = env_int("ATLAS_SNAPSHOT_MAX_GONE_NODES", 50)
ATLAS_PENDING_SNAPSHOT_GRACE_S = env_int("ATLAS_PENDING_SNAPSHOT_GRACE_S", 60)
ATLAS_FABRIC_SNAPSHOT_RETENTION = env_int("ATLAS_FABRIC_SNAPSHOT_RETENTION", 5)  # raw texts kept
# GPU health: repeats of one event closer than this are one episode; a re-sent event batch is
# recognised this long; events and counter history are kept this long.
ATLAS_HEALTH_EPISODE_GAP_S = env_int("ATLAS_HEALTH_EPISODE_GAP_S", 3600)
ATLAS_HEALTH_RECEIPT_DAYS = env_int("ATLAS_HEALTH_RECEIPT_DAYS", 30)
ATLAS_HEALTH_RETENTION_DAYS = env_int("ATLAS_HEALTH_RETENTION_DAYS", 730)
# Workloads: ended ones are kept this long, then summed per day, user and account; a server's
# GPU processes are dropped once its last report is older than this (they are facts of now).
ATLAS_WORKLOAD_RETENTION_DAYS = env_int("ATLAS_WORKLOAD_RETENTION_DAYS", 30)
ATLAS_PROCESS_FACTS_MAX_AGE_S = env_int("ATLAS_PROCESS_FACTS_MAX_AGE_S", 900)
# Integrations (integrations/, docs/deploy.md). /metrics answers only with
# `Authorization: Bearer <ATLAS_METRICS_TOKEN>`; unset, it is off (404).
ATLAS_METRICS_TOKEN = os.environ.get("ATLAS_METRICS_TOKEN", "")
ATLAS_METRICS_WINDOW_S = env_int("ATLAS_METRICS_WINDOW_S", 900)  # apply latency over this window
# Each process writes its count of report answers at most this often (no commit per report).
ATLAS_METRICS_FLUSH_S = env_int("ATLAS_METRICS_FLUSH_S", 10)
# Base of the absolute links sent to other tools (Alertmanager's generatorURL, webhook bodies).
ATLAS_PUBLIC_URL = os.environ.get("ATLAS_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
ATLAS_ALERTMANAGER_URL = os.environ.get("ATLAS_ALERTMANAGER_URL", "").rstrip("/")
ATLAS_ALERT_INTERVAL_S = env_int("ATLAS_ALERT_INTERVAL_S", 60)
ATLAS_WEBHOOK_TIMEOUT_S = env_int("ATLAS_WEBHOOK_TIMEOUT_S", 10)
ATLAS_WEBHOOK_RETRY_WINDOW_S = env_int("ATLAS_WEBHOOK_RETRY_WINDOW_S", 24 * 3600)
ATLAS_WEBHOOK_RETENTION_DAYS = env_int("ATLAS_WEBHOOK_RETENTION_DAYS", 30)  # sent or failed ones
# Bodies are limited per endpoint, unread (core/api/body_limit.py): reports by
# ATLAS_REPORT_MAX_BYTES, scheduler and fabric snapshots, name maps and topology.conf by
# ATLAS_SNAPSHOT_MAX_BYTES, every other endpoint by this; so Django's own check is off.
ATLAS_API_BODY_MAX_BYTES = env_int("ATLAS_API_BODY_MAX_BYTES", 1024 * 1024)
# Webhooks never post to loopback, link-local, private, multicast or reserved addresses
# (integrations/destinations.py), except inside these comma-separated CIDRs.
ATLAS_WEBHOOK_ALLOWED_NETWORKS = os.environ.get("ATLAS_WEBHOOK_ALLOWED_NETWORKS", "")
try:
    [
        ipaddress.ip_network(p.strip(), strict=False)
        for p in ATLAS_WEBHOOK_ALLOWED_NETWORKS.split(",")
        if p.strip()
    ]
except ValueError as exc:
    raise ImproperlyConfigured(f"ATLAS_WEBHOOK_ALLOWED_NETWORKS: {exc}") from exc
# Pending deliveries kept per webhook; beyond it the oldest are dropped (counted on its page).
ATLAS_WEBHOOK_MAX_PENDING = env_int("ATLAS_WEBHOOK_MAX_PENDING", 1000)
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
