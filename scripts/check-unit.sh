#!/usr/bin/env bash
# Checks deploy/systemd/hotrow.service with systemd-analyze verify (nothing
# here runs systemd as PID 1), its ExecStart pointed at the binary given,
# and that the config file it names is one hotrow serve reads.
#   scripts/check-unit.sh build/hotrow
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-build/hotrow}")
DIR=$(mktemp -d /tmp/hotrow-unit.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
sed "s|/usr/local/bin/hotrow serve --config /etc/hotrow/hotrow.toml|$BIN serve --config $PWD/deploy/systemd/hotrow.toml|" \
  deploy/systemd/hotrow.service >"$DIR/hotrow.service"
grep -q "ExecStart=$BIN serve" "$DIR/hotrow.service" || { echo "check-unit: ExecStart not rewritten" >&2; exit 1; }
out=$(systemd-analyze verify "$DIR/hotrow.service" 2>&1 || true)
# Lines about other units on this machine are not ours.
ours=$(grep -F "hotrow.service" <<<"$out" || true)
if [[ -n $ours ]]; then
  echo "check-unit: systemd-analyze verify found:" >&2
  echo "$ours" >&2
  exit 1
fi
for want in Type=notify DynamicUser=yes ProtectSystem=strict StateDirectory=hotrow NoNewPrivileges=yes LimitNOFILE=; do
  grep -q "^$want" deploy/systemd/hotrow.service || { echo "check-unit: the unit lacks $want" >&2; exit 1; }
done
"$BIN" serve --config deploy/systemd/hotrow.toml --print-config >"$DIR/config.txt"
grep -q '^admin-token = "\*\*\*"  # config file$' "$DIR/config.txt" || { cat "$DIR/config.txt" >&2; exit 1; }
echo "check-unit: deploy/systemd/hotrow.service verifies; its config file reads"
