#!/bin/sh
# Regenerates api_pb2.py and api_pb2_grpc.py from api.proto with grpcio-tools
# (requirements-dev.txt). Run from anywhere; the generated modules import each other as
# `agent.podresources`, so protoc runs from the repository root.
set -eu
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-.venv/bin/python}"
"$PYTHON" -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. agent/podresources/api.proto
echo "regenerated agent/podresources/api_pb2.py and api_pb2_grpc.py"
