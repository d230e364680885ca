# Sourced by the container scripts: podman as this sandbox allows it (runc,
# not crun; no default ulimits) and with netavark, whose aardvark-dns lets
# compose services resolve each other by name. Harmless where podman already
# runs this way.
conf=${HOTROW_CONTAINERS_CONF:-/tmp/hotrow-containers.conf}
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n\n[network]\nnetwork_backend = "netavark"\n' >"$conf"
export CONTAINERS_CONF=$conf
