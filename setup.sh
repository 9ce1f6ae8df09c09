#!/usr/bin/env bash
# Set-up, idempotent: creates .venv and installs the pipeline with the pins of envs/requirements.txt.
#   ./setup.sh        the pipeline, and Quarto if it installs (else the report renders through Jupyter)
#   ./setup.sh test   also the test tools, Debian's chromium for the report's browser test, and slurm-wlm and
#                     munge for the SLURM test's local controller
set -euo pipefail
cd "$(dirname "$0")"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "setup.sh: needs Python >= 3.11" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -r envs/requirements.txt -e .
if [ "${1:-}" = test ]; then
  .venv/bin/pip install -q -r envs/requirements-test.txt
  # Debian's chromium for the report's browser test; slurm-wlm and munge for tests/test_slurm.py's real cluster
  missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      echo "setup.sh: install Debian's ${missing[*]} (apt-get install ${missing[*]}) for the browser and SLURM tests" >&2
    fi
  fi
elif ! command -v quarto >/dev/null && [ ! -x .venv/bin/quarto ]; then
  # quarto-cli fetches the Quarto binary from GitHub while installing; where that is unreachable the report
  # is rendered through Jupyter instead (the report rule's log says which renderer ran).
  .venv/bin/pip install -q quarto-cli 2>/dev/null || echo "setup.sh: Quarto could not be installed; the report will render through Jupyter"
fi
