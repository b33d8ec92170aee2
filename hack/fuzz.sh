#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each (default 10s): hack/fuzz.sh [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-10s}"
found=0
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    found=1
    echo "fuzz $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 10x "$pkg"
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
if [ "$found" = 0 ]; then echo "no fuzz targets"; fi
