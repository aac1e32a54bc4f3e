#!/bin/sh
# Configuring TuCCL with a test group that cannot be skipped fails, naming the value and the groups
# that can be. Usage: cmake_bad_option.sh CMAKE SOURCE_DIR
cmake=$1 source=$2
scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT
if out=$("$cmake" -S "$source" -B "$scratch" -DTUCCL_CUDA=OFF -DTUCCL_TESTS_SKIPPED="lang;backend" 2>&1); then
  echo "configured with TUCCL_TESTS_SKIPPED=lang;backend:"; echo "$out"; exit 1
fi
echo "$out" | grep -q "TUCCL_TESTS_SKIPPED: 'backend' is not a test group that can be skipped" ||
  { echo "the error does not name the value:"; echo "$out"; exit 1; }
echo "refused: $(echo "$out" | grep -m1 TUCCL_TESTS_SKIPPED)"
