"""Deployment security settings from the environment, and the pages' Content-Security-Policy."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management.utils import get_random_secret_key

from config.csp import source_hash

REPO = Path(__file__).resolve().parents[2]
# Not what settings read for security: the database and broker of README's example are hosts
# that do not exist here, and `check` does not need them.
NOT_SECURITY = ("DATABASE_URL", "REDIS_URL")


def production_environment() -> dict[str, str]:
    """The variables README's "Production shape" block exports, as an operator would copy them."""
    block = (REPO / "README.md").read_text().split("## Production shape", 1)[1].split("```")[1]
    variables: dict[str, str] = {}
    for line in block.replace("\\\n", " ").splitlines():
        if line.strip().startswith("export "):
            for word in shlex.split(line.strip().removeprefix("export ")):
                name, _, value = word.partition("=")
                variables[name] = value
    assert variables.get("DJANGO_DEBUG") == "0", "README's production block changed shape"
    for name in NOT_SECURITY:
        variables.pop(name, None)
    variables["DJANGO_SECRET_KEY"] = get_random_secret_key()  # README says `...`
    return variables


def django(tmp_path: Path, variables: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`manage.py ARGS` in a fresh process: settings are read from the environment at start."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "ATLAS_", "CELERY_")) and k not in NOT_SECURITY
    }
    env |= {"ATLAS_VAR_DIR": str(tmp_path), "DJANGO_STATIC_ROOT": str(tmp_path / "static")}
    env |= variables
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


SHOW = "from django.conf import settings as s; import json; print(json.dumps({n: getattr(s, n, None) for n in %r}))"  # noqa: E501


def settings_of(tmp_path, variables: dict[str, str], *names: str) -> dict:
    result = django(tmp_path, variables, "shell", "-c", SHOW % (names,))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


# drf-spectacular's W001 (component and enum naming in the OpenAPI schema) is no deployment
# setting; it is the schema's own work, and left out here deliberately.
LEFT = {"drf_spectacular.W001"}


def test_check_deploy_passes_with_the_documented_production_variables(tmp_path):
    result = django(tmp_path, production_environment(), "check", "--deploy")
    assert result.returncode == 0, result.stderr
    found = set(re.findall(r"\b([a-z_]+\.[WE]\d+)\b", result.stdout + result.stderr))
    assert found - LEFT == set(), result.stdout + result.stderr


def test_without_them_check_deploy_names_what_is_missing_but_cookies_are_secure(tmp_path):
    minimal = {
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": get_random_secret_key(),
        "DJANGO_ALLOWED_HOSTS": "atlas.example.org",
    }
    result = django(tmp_path, minimal, "check", "--deploy")
    warnings = set(re.findall(r"security\.W\d+", result.stdout + result.stderr))
    assert warnings == {"security.W004", "security.W008"}  # HSTS and the HTTPS redirect
    # DEBUG off: session and CSRF cookies go over HTTPS only, with no variable set.
    secure = settings_of(tmp_path, minimal, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE")
    assert secure == {"SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True}
    # No proxy header is believed unless one is named: a client could send it.
    assert settings_of(tmp_path, minimal, "SECURE_PROXY_SSL_HEADER") == {
        "SECURE_PROXY_SSL_HEADER": None
    }


def test_the_variables_reach_the_settings(tmp_path):
    variables = {
        "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
        "DJANGO_SECURE_HSTS_SECONDS": "600",
        "DJANGO_SESSION_COOKIE_SECURE": "0",
        "ATLAS_CSP_REPORT_ONLY": "1",
        "ATLAS_CSP_REPORT_URI": "/csp-report/",
        "ATLAS_PUBLIC_API_SCHEMA": "1",
        "ATLAS_KUBECONFIG_DIR": "/srv/kube",
    }
    found = settings_of(
        tmp_path,
        variables,
        "SECURE_PROXY_SSL_HEADER",
        "SECURE_HSTS_SECONDS",
        "SESSION_COOKIE_SECURE",
        "CONTENT_SECURITY_POLICY",
        "CONTENT_SECURITY_POLICY_REPORT_ONLY",
        "ATLAS_PUBLIC_API_SCHEMA",
    )
    assert found["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert found["SECURE_HSTS_SECONDS"] == 600
    assert found["SESSION_COOKIE_SECURE"] is False
    assert found["CONTENT_SECURITY_POLICY"] is None  # report-only: nothing is blocked
    report_only = found["CONTENT_SECURITY_POLICY_REPORT_ONLY"]["DIRECTIVES"]
    assert report_only["report-uri"] == ["/csp-report/"]
    assert found["ATLAS_PUBLIC_API_SCHEMA"] is True


@pytest.mark.django_db
def test_behind_a_proxy_https_is_told_by_its_header(client, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    plain = client.get("/login/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/login/"
    secure = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"


@pytest.mark.django_db
def test_pages_carry_a_policy_without_inline_script(client):
    policy = client.get("/login/")["Content-Security-Policy"]
    directives = dict(
        (part.split()[0], part.split()[1:]) for part in policy.split(";") if part.strip()
    )
    assert directives["script-src"] == ["'self'"]
    assert directives["default-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    # Inline style only as exact hashes: plotly.js's empty <style> and its <b> labels.
    assert source_hash("") in directives["style-src"]
    assert source_hash("font-weight:bold") in directives["style-src-attr"]


TEMPLATES = sorted((REPO / "templates").rglob("*.html"))
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "inline <script>"),
    (re.compile(r"<style\b", re.I), "<style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "style attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "event handler attribute"),
    (re.compile(r"javascript:", re.I), "javascript: URL"),
]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(REPO)))
def test_templates_hold_nothing_the_policy_would_refuse(template):
    text = template.read_text()
    found = [what for pattern, what in INLINE if pattern.search(text)]
    assert found == [], (template, found)
