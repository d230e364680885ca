#!/usr/bin/env bash
# Installs every Debian package that hotrow's build, `make run`, `make test`
# and the benchmark scripts need. Idempotent: packages already installed are
# skipped, and apt is not touched at all when nothing is missing.
# Works as root or through sudo.
#   scripts/setup.sh             what make run, make test and the benchmarks need
#   scripts/setup.sh containers  that, plus podman, podman-compose and
#                                debootstrap (make image, scripts/compose-test)
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  libboost-dev libsqlite3-dev sqlite3 libssl-dev
  rapidjson-dev libcli11-dev libspdlog-dev libfmt-dev
  libpq-dev libhiredis-dev libicu-dev libsystemd-dev
  # leaderboard seasons: local midnights in IANA time zones
  libcctz-dev tzdata
  # docs/openapi.yaml -> JSON at build time, and its check against the server
  python3 python3-yaml python3-jsonschema
  # the systemd unit's check (systemd-analyze verify)
  systemd
  # tests and micro-benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev curl procps
  # formatting (make test checks it), lint (make lint), the fuzz targets (make
  # fuzz) and the sanitizer build (make test): clang, its sanitizer and
  # libFuzzer runtimes and the symbolizer for their reports (both only
  # Recommends of clang, which --no-install-recommends below skips)
  clang-format clang-tidy clang libclang-rt-14-dev llvm-14
  # servers the tests start on loopback
  postgresql redis-server
  # load tools and the HTTP ceiling used by the benchmarks
  hey wrk nginx-light
  # the fault rig (make test, make faults): clock steps
  faketime libfaketime
)
if [[ ${1:-} == containers ]]; then
  # netavark and aardvark-dns: compose services find each other by name
  # (podman 4.3 with CNI and no dnsname plugin resolves none).
  packages+=(podman runc netavark aardvark-dns podman-compose debootstrap)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "setup: installing ${missing[*]}"
# Debian's postinst scripts start nginx, redis and postgresql as system
# services on their default ports. hotrow's tests and benchmarks start their
# own instances on free ports, so keep the package installs from starting
# daemons (policy-rc.d exit 101 = "action not allowed"), unless the machine
# already has a policy of its own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee $policy >/dev/null
  "${sudo[@]}" chmod +x $policy
  made_policy=1
fi
cleanup() { if ((made_policy)); then "${sudo[@]}" rm -f $policy; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
