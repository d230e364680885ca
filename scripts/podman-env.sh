# Sourced by the container scripts: podman as this sandbox allows it (runc,
# not crun; no default ulimits). Harmless where podman runs as usual.
conf=${HOTROW_CONTAINERS_CONF:-/tmp/hotrow-containers.conf}
if [[ ! -f $conf ]]; then
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$conf"
fi
export CONTAINERS_CONF=$conf
