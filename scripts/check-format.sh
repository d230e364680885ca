#!/usr/bin/env bash
# Fails when a C++ file under src/, tests/, bench/ or fuzz/ differs from what
# .clang-format makes of it, and names the files. `make format` fixes them.
#   scripts/check-format.sh          check
#   scripts/check-format.sh --fix    rewrite in place
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc' 'bench/*.h' 'fuzz/*.cc')
if [[ ${1:-} == --fix ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "not formatted (run: make format):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format wants them"
