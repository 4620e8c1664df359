#!/usr/bin/env bash
# Start Schedule Explorer on http://127.0.0.1:5000 (installs what it needs first).
# Extra arguments go to `python -m app` (e.g. --port 8000, --classroom).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/python -m app "$@"
