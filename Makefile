# Cluster Atlas. `make run` to try it, `make test` to test it; both create .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-fast lint format venv demo migrate worker beat bench clean podresources-proto \
	image image-test image-reproducible

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

migrate: venv
	$(PY) manage.py migrate --no-input

demo: migrate
	$(PY) manage.py demo

# The demo fleet keeps reporting while the server runs, and beat's schedule runs beside it
# (`runschedule`: the periodic tasks a worker and beat run in production): two background
# processes, in this process group (Ctrl-C stops them too), that also stop when the server
# stops answering.
run: migrate
	$(PY) manage.py demo --keep-alive http://$(HOST):$(PORT)
	$(PY) manage.py runschedule --with-server http://$(HOST):$(PORT) &
	@echo "Cluster Atlas on http://$(HOST):$(PORT)/ (user: admin, password: admin)"
	$(PY) manage.py runserver $(HOST):$(PORT)

# One test process per core (pytest-xdist); TEST_WORKERS=0 runs every test in this process
# (to read the fuzzing tier's tally, or to debug with pdb).
TEST_WORKERS ?= auto
test: venv
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The tiers that need no service (no PostgreSQL, Redis, Slurm or Chromium), on the embedded
# SQLite whatever DATABASE_URL says; the minutes-long fuzzing tier is left out too.
FAST_TIERS := not integration and not postgres and not slurm and not browser and not fuzz
test-fast: venv
	env -u DATABASE_URL $(PY) -m pytest -n $(TEST_WORKERS) -m "$(FAST_TIERS)" $(PYTEST_ARGS)

# The same three checks as .pre-commit-config.yaml; mypy's paths are in pyproject.toml.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

worker: venv
	$(VENV)/bin/celery -A config worker --loglevel=INFO

beat: venv
	$(VENV)/bin/celery -A config beat --loglevel=INFO

bench: venv
	for b in bench/*.py; do $(PY) $$b || exit 1; done

# The agent's kubelet pod-resources gRPC code, from the published proto (grpcio-tools).
podresources-proto: venv
	PYTHON=$(PY) agent/podresources/regenerate.sh

# Container images (README.md, "Container images"): podman, buildah, mmdebstrap and runc from
# Debian; built from the commit (git archive HEAD), reproducibly. image-test runs them against
# this machine's PostgreSQL and Redis.
image:
	deploy/images/build.sh all

image-test:
	deploy/images/smoke.sh

image-reproducible:
	deploy/images/reproduce.sh

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache
