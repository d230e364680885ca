#!/usr/bin/env bash
# make lint: clang-tidy (.clang-tidy: bugprone and performance checks) over
# every source file under src/, with the compile commands of the Release
# build. About as long as one full build; not part of make test.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/compile_commands.json ]] || { echo "lint: run make build first" >&2; exit 1; }
jobs=${JOBS:-2}
# The build's -Wno-maybe-uninitialized is GCC's; clang would call it unknown.
# RapidJSON's iterators trip clang's C++20 reversed-operator warning.
git ls-files 'src/*.cc' | xargs -P "$jobs" -n 4 clang-tidy -p build --quiet \
  --extra-arg=-Wno-unknown-warning-option --extra-arg=-Wno-ambiguous-reversed-operator 2>/dev/null
echo "lint: clean"
