#!/bin/sh
# The backend image's entrypoint: its first argument chooses what the container runs, with the
# same commands and flags as deploy/systemd's units (tests/deploy/test_images.py holds them
# together). Settings: the environment (README.md, "Configuration"), plus these for the
# processes themselves, as in deploy/systemd/atlas.env.example:
#   ATLAS_WEB_BIND (0.0.0.0:8000), ATLAS_WEB_WORKERS (4), ATLAS_WEB_FORWARDED_ALLOW_IPS (127.0.0.1),
#   ATLAS_WORKER_CONCURRENCY (4).
#   web | worker | beat | migrate | <any manage.py command> [its arguments...]
set -eu
if [ -d /opt/cluster-atlas ]; then cd /opt/cluster-atlas; fi

command="${1:-web}"
[ "$#" -gt 0 ] && shift
case "$command" in
  web)
    exec gunicorn config.wsgi \
      --bind "${ATLAS_WEB_BIND:-0.0.0.0:8000}" \
      --workers "${ATLAS_WEB_WORKERS:-4}" \
      --timeout 60 \
      --graceful-timeout 30 \
      --max-requests 10000 \
      --max-requests-jitter 1000 \
      --limit-request-line 8190 \
      --access-logfile - \
      --forwarded-allow-ips "${ATLAS_WEB_FORWARDED_ALLOW_IPS:-127.0.0.1}" \
      "$@"
    ;;
  worker)
    exec celery -A config worker \
      --loglevel=INFO \
      --concurrency="${ATLAS_WORKER_CONCURRENCY:-4}" \
      --hostname=worker@%h \
      --without-mingle \
      "$@"
    ;;
  beat)
    exec celery -A config beat \
      --loglevel=INFO \
      --schedule="${ATLAS_VAR_DIR:-/var/lib/cluster-atlas}/celerybeat-schedule" \
      "$@"
    ;;
  migrate)
    exec python manage.py migrate --no-input "$@"
    ;;
  help | --help | -h)
    echo "usage: cluster-atlas web|worker|beat|migrate|<manage.py command> [arguments...]"
    exec python manage.py help
    ;;
  *)
    exec python manage.py "$command" "$@"
    ;;
esac
