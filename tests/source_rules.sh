#!/usr/bin/env bash
# Rules of the source tree that a reader relies on, checked on every test run:
#   - the environment is read only by support/environment.cc (one rule for empty values, one
#     error format); tests set and read variables as they please.
# Usage: source_rules.sh <source dir>
set -euo pipefail
cd "$1"
status=0
readers=$(grep -rlE '\b(std::)?(secure_)?getenv\s*\(' --include='*.cc' --include='*.h' --include='*.cu' --include='*.cuh' \
            backend bench include kernelgen lang net plan plugin scheduler sim support synth table tools topo transport tune \
            2>/dev/null | grep -v '^support/environment\.cc$' || true)
if [[ -n "$readers" ]]; then
  echo "getenv outside support/environment.cc (read variables through support/environment.h):"
  echo "$readers" | sed 's/^/  /'
  status=1
fi
exit $status
