"""The shipped proxy agrees with the app behind it (issue 26 item 7): deploy/nginx's limits are
the app's body limits endpoint by endpoint, its timeouts wait past gunicorn's and the statement
timeout, its request line is gunicorn's; the Kubernetes Ingress carries the same per-request
settings; and the site file is one nginx itself accepts (`nginx -t`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import resolve

from core.api.body_limit import body_limit_of
from tests.conftest import require

from .test_kubernetes_manifests import find, rendered

ROOT = Path(settings.BASE_DIR)
NGINX = ROOT / "deploy" / "nginx"
SNIPPET = NGINX / "cluster-atlas-proxy.conf"
UNITS = {"unit": ROOT / "deploy/systemd/cluster-atlas-web.service"}
UNITS["image"] = ROOT / "deploy/images/entrypoint.sh"


def directives(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
    """The snippet's top-level directives and its locations (match, directives); one level
    deep, which is all the snippet has."""
    text = re.sub(r"#[^\n]*", "", text)
    text = re.sub(r"'[^']*'", "''", text)  # a quoted body may hold braces and semicolons
    top: dict[str, str] = {}
    locations: list[tuple[str, dict[str, str]]] = []
    for match in re.finditer(r"location\s+([^{]+?)\s*\{([^}]*)\}|([a-z_]+)\s+([^;{]+);", text):
        if match.group(1):
            inner = dict(re.findall(r"([a-z_]+)\s+([^;]+);", match.group(2)))
            locations.append((match.group(1).strip(), inner))
        else:
            top.setdefault(match.group(3), match.group(4).strip())
    return top, locations


def location_for(path: str, locations: list[tuple[str, dict[str, str]]]) -> dict[str, str]:
    """nginx's choice: an exact match, else the first matching regex, else the longest prefix."""
    for match, inner in locations:
        if match == f"= {path}":
            return inner
    for match, inner in locations:
        if match.startswith("~ ") and re.search(match[2:], path):
            return inner
    prefixes = [(m, i) for m, i in locations if not m.startswith(("=", "~")) and path.startswith(m)]
    return max(prefixes, key=lambda item: len(item[0]))[1]


def size_bytes(value: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(value[:-1]) * units[value[-1]] if value[-1] in units else int(value)


def seconds(value: str) -> int:
    return int(value.removesuffix("s"))


def gunicorn_flag(name: str) -> set[int]:
    """The flag's value in the systemd unit and the image's entrypoint (one value, both)."""
    return {int(re.search(rf"{name} (\d+)", p.read_text()).group(1)) for p in UNITS.values()}


TOP, LOCATIONS = directives(SNIPPET.read_text())


@pytest.mark.parametrize(
    ("path", "setting"),
    [
        ("/api/v1/servers/", "ATLAS_API_BODY_MAX_BYTES"),
        ("/api/v1/agents/enroll/", "ATLAS_API_BODY_MAX_BYTES"),
        ("/api/v1/webhooks/", "ATLAS_API_BODY_MAX_BYTES"),
        ("/login/", "ATLAS_API_BODY_MAX_BYTES"),
        ("/api/v1/reports/", "ATLAS_REPORT_MAX_BYTES"),
        ("/api/v1/clusters/c-1/snapshots/", "ATLAS_SNAPSHOT_MAX_BYTES"),
        ("/api/v1/clusters/c-1/topology/", "ATLAS_SNAPSHOT_MAX_BYTES"),
        ("/api/v1/fabrics/ib0/snapshots/", "ATLAS_SNAPSHOT_MAX_BYTES"),
        ("/api/v1/fabrics/ib0/node-name-map/", "ATLAS_SNAPSHOT_MAX_BYTES"),
    ],
)
def test_nginx_refuses_bodies_at_the_apps_limit_of_each_endpoint(path: str, setting: str) -> None:
    assert body_limit_of(resolve(path).func).setting == setting  # the app's own, for this path
    location = location_for(path, LOCATIONS)
    limit = location.get("client_max_body_size", TOP["client_max_body_size"])
    assert size_bytes(limit) == getattr(settings, setting), path
    assert location["proxy_pass"] == "http://cluster_atlas_web"


def test_bodies_and_answers_are_buffered_so_slow_clients_hold_no_gunicorn_thread() -> None:
    assert TOP["proxy_request_buffering"] == "on"
    assert TOP["proxy_buffering"] == "on"
    # Every report and heartbeat in memory.
    assert size_bytes(TOP["client_body_buffer_size"]) >= settings.ATLAS_REPORT_MAX_BYTES
    for name in ("client_header_timeout", "client_body_timeout", "send_timeout"):
        assert 0 < seconds(TOP[name]) <= 30, name
    assert seconds(TOP["keepalive_timeout"]) <= 60


def test_nginx_waits_for_gunicorn_which_outlasts_the_statement_timeout() -> None:
    (worker_timeout,) = gunicorn_flag("--timeout")
    assert worker_timeout > settings.ATLAS_DB_STATEMENT_TIMEOUT_MS / 1000
    assert seconds(TOP["proxy_read_timeout"]) > worker_timeout
    assert seconds(TOP["proxy_send_timeout"]) >= worker_timeout


def test_the_request_line_limit_is_gunicorns() -> None:
    (line_limit,) = gunicorn_flag("--limit-request-line")
    count, size = TOP["large_client_header_buffers"].split()
    assert int(count) >= 2 and size_bytes(size) == line_limit + 2  # 8190 bytes and CRLF


def test_the_proxy_sets_the_scheme_header_django_and_gunicorn_trust() -> None:
    headers = re.findall(r"proxy_set_header\s+(\S+)\s+([^;]+);", SNIPPET.read_text())
    sent = dict(headers)
    assert sent["X-Forwarded-Proto"] == "$scheme"  # always overwritten, never the client's
    assert sent["X-Forwarded-For"] == "$remote_addr"
    assert sent["X-Forwarded-Protocol"] == sent["X-Forwarded-Ssl"] == '""'  # gunicorn's others
    env = (ROOT / "deploy/systemd/atlas.env.example").read_text()
    assert "DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO" in env
    assert "ATLAS_WEB_FORWARDED_ALLOW_IPS=127.0.0.1" in env
    assert "ATLAS_WEB_BIND=127.0.0.1:8000" in env
    assert "server 127.0.0.1:8000;" in (NGINX / "cluster-atlas.conf").read_text()


def test_the_ingress_carries_the_same_settings() -> None:
    for overlay in ("small", "production"):
        ingress = find(rendered(overlay), "Ingress", "cluster-atlas-web")
        notes = {
            k.removeprefix("nginx.ingress.kubernetes.io/"): v
            for k, v in ingress["metadata"]["annotations"].items()
        }
        assert size_bytes(notes["proxy-body-size"]) == settings.ATLAS_SNAPSHOT_MAX_BYTES
        assert notes["client-body-buffer-size"] == TOP["client_body_buffer_size"]
        assert notes["proxy-request-buffering"] == notes["proxy-buffering"] == "on"
        assert notes["proxy-buffer-size"] == TOP["proxy_buffer_size"]
        assert notes["proxy-buffers-number"] == TOP["proxy_buffers"].split()[0]
        for name in ("connect", "send", "read"):
            key = f"proxy-{name}-timeout"
            assert int(notes[key]) == seconds(TOP[key.replace("-", "_")]), key
        backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
        service = find(rendered(overlay), "Service", backend["name"])
        assert backend["port"]["name"] in [p["name"] for p in service["spec"]["ports"]]
        assert ingress["spec"]["tls"][0]["secretName"]


def test_nginx_accepts_the_site_file(tmp_path: Path) -> None:
    """`nginx -t` of cluster-atlas.conf as installed, with a throw-away certificate."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    openssl = shutil.which("openssl")
    require(nginx is not None and openssl is not None, "nginx or openssl not found")
    assert nginx and openssl
    cert, key = tmp_path / "atlas.pem", tmp_path / "atlas.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=atlas.example.org", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    site = (NGINX / "cluster-atlas.conf").read_text()
    site = site.replace("/etc/nginx/snippets/cluster-atlas-proxy.conf", str(SNIPPET))
    site = site.replace("/etc/ssl/certs/atlas.pem", str(cert))
    site = site.replace("/etc/ssl/private/atlas.key", str(key))
    (tmp_path / "site.conf").write_text(site)
    temp = " ".join(f"{k}_temp_path {tmp_path / k};" for k in ("client_body", "proxy"))
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"pid {tmp_path / 'nginx.pid'}; error_log {tmp_path / 'error.log'};\n"
        f"events {{}}\nhttp {{ {temp} include {tmp_path / 'site.conf'}; }}\n"
    )
    done = subprocess.run(
        [nginx, "-t", "-p", f"{tmp_path}/", "-e", str(tmp_path / "error.log"), "-c", str(conf)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "syntax is ok" in done.stderr
