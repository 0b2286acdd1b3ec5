#!/usr/bin/env bash
# make image-test: runs the images built by `make image` against this machine's PostgreSQL
# and Redis, end to end. The backend image migrates a scratch database, serves /readyz, the
# API and the dashboard's login page (web), applies a report (worker) and fires periodic tasks
# (beat); the agent image reads saved nvidia-smi output and pushes its report, once with an
# agent token and once enrolling with an enrollment token, and each server appears in the API.
# Every wait is bounded; the containers and the scratch database go whatever happens.
# Environment: ATLAS_SMOKE_PG (postgres://postgres@127.0.0.1:5432), ATLAS_SMOKE_REDIS_URL
# (redis://127.0.0.1:6379/9), ATLAS_SMOKE_TAG (latest).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS

pg="${ATLAS_SMOKE_PG:-postgres://postgres@127.0.0.1:5432}"
redis_url="${ATLAS_SMOKE_REDIS_URL:-redis://127.0.0.1:6379/9}"
tag="${ATLAS_SMOKE_TAG:-latest}"
backend="localhost/cluster-atlas:$tag"
agent="localhost/cluster-atlas-agent:$tag"
run_id="atlas-smoke-$$"
db="atlas_smoke_$$"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
work="$(mktemp -d "${TMPDIR:-/tmp}/atlas-smoke.XXXXXX")"
chmod 0755 "$work"
hostname_="smoke-gpu-$$"
sample="tests/fixtures/samples/nvsmi-q-x-rtxpro6000-blackwell-v13-telegraf.xml"

say() { printf 'smoke: [%3ds] %s\n' "$((SECONDS - started))" "$*"; }
fail() {
  printf 'smoke: FAILED: %s\n' "$*" >&2
  for c in web worker beat; do
    podman_ container exists "$run_id-$c" 2>/dev/null || continue
    echo "----- last lines of $c -----" >&2
    podman_ logs --tail 30 "$run_id-$c" >&2 2>&1 || true
  done
  exit 1
}
podman_() { podman --runtime runc "$@"; }

cleanup() {
  local c
  for c in web worker beat; do podman_ rm -f -t 5 "$run_id-$c" >/dev/null 2>&1 || true; done
  psql "$pg/postgres" -q -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  redis-cli -u "$redis_url" flushdb >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

for image in "$backend" "$agent"; do
  podman_ image exists "$image" || fail "no image $image: run make image first"
done
pg_isready -q -d "$pg/postgres" || fail "PostgreSQL is not answering at $pg"
redis-cli -u "$redis_url" ping >/dev/null || fail "Redis is not answering at $redis_url"
psql "$pg/postgres" -q -c "CREATE DATABASE $db" >/dev/null || fail "cannot create database $db"
redis-cli -u "$redis_url" flushdb >/dev/null

# Only the README's variables, and the entrypoint's own (deploy/images/entrypoint.sh).
cat >"$work/env" <<ENV
DATABASE_URL=$pg/$db
REDIS_URL=$redis_url
DJANGO_SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(40))')
DJANGO_ALLOWED_HOSTS=127.0.0.1,localhost
DJANGO_SESSION_COOKIE_SECURE=0
DJANGO_CSRF_COOKIE_SECURE=0
ATLAS_PUBLIC_URL=$url
ATLAS_TASK_LOG_LEVEL=INFO
ATLAS_WEB_BIND=127.0.0.1:$port
ATLAS_WEB_WORKERS=2
ATLAS_WORKER_CONCURRENCY=1
ENV

run_args=(--network=host --init --env-file "$work/env"
  --ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
once() { timeout 120 podman --runtime runc run --rm "${run_args[@]}" "$backend" "$@"; }
# Waits up to $1 seconds for the command after it; fails with the message in $2.
wait_for() {
  local seconds="$1" what="$2"
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what (waited ${seconds}s)"
    sleep 1
  done
}

say "migrate"
once migrate >"$work/migrate.log" 2>&1 || { tail -20 "$work/migrate.log" >&2; fail "migrate"; }

say "start web, worker, beat (read-only, no capabilities: as deploy/kubernetes runs them)"
for c in web worker beat; do
  # ATLAS_VAR_DIR: an emptyDir in Kubernetes, a directory of the image's user here.
  mkdir -p "$work/var-$c"
  chown 10001:10001 "$work/var-$c"
  podman_ run -d --name "$run_id-$c" "${run_args[@]}" --read-only \
    -v "$work/var-$c:/var/lib/cluster-atlas" \
    --cap-drop=ALL --security-opt=no-new-privileges \
    "$backend" "$c" >/dev/null || fail "start $c"
done

say "wait for $url/readyz"
wait_for 90 "/readyz never answered 200" curl -fsS "$url/readyz"
curl -fsS "$url/healthz" | grep -q '"ok"' || fail "/healthz"
say "readyz: $(curl -fsS "$url/readyz")"

code="$(curl -s -o /dev/null -w '%{http_code}' "$url/api/v1/servers/")"
[[ $code == 401 ]] || fail "/api/v1/servers/ unauthenticated answered $code, not 401"
curl -fsS "$url/login/" >"$work/login.html" || fail "the dashboard's login page"
grep -qi '<form' "$work/login.html" || fail "the dashboard's login page has no form"
css="$(grep -oE '/static/[^"]+\.css' "$work/login.html" | head -n1)"
[[ -n $css ]] || fail "the login page links no stylesheet"
curl -fsS -o /dev/null "$url$css" || fail "the collected static file $css is not served"

say "staff user and API token; agent token"
DJANGO_SUPERUSER_PASSWORD="$(python3 -c 'import secrets; print(secrets.token_urlsafe(16))')"
export DJANGO_SUPERUSER_PASSWORD
timeout 120 podman --runtime runc run --rm "${run_args[@]}" -e DJANGO_SUPERUSER_PASSWORD "$backend" \
  createsuperuser --no-input --username smoke --email smoke@example.org >/dev/null ||
  fail "createsuperuser"
api_token="$(once createapitoken smoke --name smoke | awk '{print $NF}')"
[[ -n $api_token ]] || fail "createapitoken printed no token"
once createagenttoken "$hostname_" | awk '{print $NF}' >"$work/token"
[[ -s $work/token ]] || fail "createagenttoken printed no token"
once createenrollmenttoken --uses 1 --expires 30m --name smoke | awk '{print $NF}' >"$work/enroll"
[[ -s $work/enroll ]] || fail "createenrollmenttoken printed no token"
chmod 0644 "$work/token" "$work/enroll"
mkdir -p "$work/state"
chown 10001:10001 "$work/state" # the agent image's user keeps its enrolled token here
api() { curl -fsS -H "Authorization: Token $api_token" "$url/api/v1/$1"; }
api "servers/" >/dev/null || fail "/api/v1/servers/ with a staff token"

# The agent image, reading a saved `nvidia-smi -q -x` as the server named by $1; its other
# arguments say how it gets its token.
agent_push() {
  local name="$1"
  shift
  timeout 120 podman --runtime runc run --rm --network=host --init --read-only --cap-drop=ALL \
    --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
    -v "$PWD/tests/fixtures/samples:/samples:ro" -v "$work/token:/run/atlas/token:ro" \
    -v "$work/enroll:/run/atlas/enroll:ro" -v "$work/state:/var/lib/cluster-atlas-agent" \
    "$agent" push --url "$url" --nvidia-smi-xml "/samples/$(basename "$sample")" \
    --hostname "$name" --system-uuid "$(python3 -c 'import sys, uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS, sys.argv[1]))' "$name")" \
    --no-kernel-log --no-pod-resources "$@" >"$work/agent.log" 2>&1 ||
    { cat "$work/agent.log" >&2; fail "the agent's push as $name"; }
}
server_listed() { api "servers/?hostname=$1" | grep -q "\"$1\""; }
gpus_listed() { api "servers/?hostname=$1" | grep -q '"gpu_count": *[1-9]'; }

say "agent image, agent token: push $sample as $hostname_"
agent_push "$hostname_" --token-file /run/atlas/token
say "wait for the worker to apply it"
wait_for 60 "server $hostname_ never appeared in /api/v1/servers/" server_listed "$hostname_"
wait_for 30 "server $hostname_ has no GPUs" gpus_listed "$hostname_"
wait_for 30 "the worker logged no applied report" \
  sh -c "podman --runtime runc logs $run_id-worker 2>&1 | grep -q 'apply_report.*succeeded'"

say "the dashboard: log in as staff and open $hostname_'s page"
jar="$work/cookies"
curl -fsS -c "$jar" -b "$jar" "$url/login/" >"$work/login-form.html" || fail "the login page"
csrf="$(sed -n 's/.*name="csrfmiddlewaretoken" value="\([^"]*\)".*/\1/p' "$work/login-form.html" | head -n1)"
[[ -n $csrf ]] || fail "the login page has no CSRF token"
curl -fsS -c "$jar" -b "$jar" -o /dev/null -H "Referer: $url/login/" \
  --data-urlencode "csrfmiddlewaretoken=$csrf" --data-urlencode "username=smoke" \
  --data-urlencode "password=$DJANGO_SUPERUSER_PASSWORD" "$url/login/" || fail "logging in"
server_id="$(api "servers/?hostname=$hostname_" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["results"][0]["id"])')"
curl -fsS -b "$jar" "$url/servers/$server_id/" >"$work/server.html" || fail "the server's page"
grep -qF "$hostname_" "$work/server.html" || fail "the server's page does not name $hostname_"
grep -qF "RTX PRO 6000" "$work/server.html" || fail "the server's page shows no GPU of the report"

enrolled="$hostname_-enrolled"
say "agent image, enrollment token: push as $enrolled"
agent_push "$enrolled" --enroll-token-file /run/atlas/enroll --state-dir /var/lib/cluster-atlas-agent
[[ -s $work/state/agent-token ]] || fail "the agent kept no enrolled token in its state directory"
[[ $(stat -c %a "$work/state/agent-token") == 600 ]] || fail "the enrolled token is not mode 0600"
wait_for 60 "enrolled server $enrolled never appeared in /api/v1/servers/" server_listed "$enrolled"
say "again with the spent enrollment token: the kept agent token is used"
agent_push "$enrolled" --enroll-token-file /run/atlas/enroll --state-dir /var/lib/cluster-atlas-agent

say "wait for beat to send a periodic task and the worker to run it"
wait_for 60 "beat sent no periodic task" \
  sh -c "podman --runtime runc logs $run_id-beat 2>&1 | grep -q 'Sending due task'"
wait_for 60 "the worker ran no periodic task" \
  sh -c "podman --runtime runc logs $run_id-worker 2>&1 | grep -qE 'Task (clusters.tasks.reconcile|health.tasks.record_health|inventory.tasks.sweep_pending_reports)\\[.*succeeded'"

say "no secret in the logs"
for c in web worker beat; do
  if podman_ logs "$run_id-$c" 2>&1 |
    grep -qF -e "$api_token" -e "$(cat "$work/token")" -e "$(cat "$work/enroll")" -e "$DJANGO_SUPERUSER_PASSWORD" \
      -e "$(cat "$work/state/agent-token")"; then
    fail "$c logged a token"
  fi
done
say "passed"
