#!/usr/bin/env bash
# Run the whole test suite (installs what it needs first, Debian's Chromium included).
# Extra arguments go to pytest (e.g. -k schedule, -m "not e2e").
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh --browser
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
# pytest exits non-zero (5) when it collects no test: that must fail CI, so keep it.
exec .venv/bin/python -m pytest "$@"
