#!/usr/bin/env bash
# netns-rsh.sh: an rsh agent for mpirun (--mca plm_rsh_agent) that starts the
# remote command in a network namespace on this machine instead of on
# another machine over ssh, so one machine can stand in for several hosts
# (tests/multihost.sh). Namespaces share the file system, so the same orted
# and cltrain paths work in each.
#   NETNS_RSH_HOSTS="10.77.0.1=ns1 10.77.0.2=ns2 ..."  host (as mpirun names
#   it: the hostfile's address) = namespace; each gets its own host name (a
#   UTS namespace named after the network namespace).
# Called by mpirun as: netns-rsh.sh [ssh-style options] HOST COMMAND...
set -u
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
host=${1:?netns-rsh.sh: no host given}
shift
for entry in ${NETNS_RSH_HOSTS:-}; do
  if [[ ${entry%%=*} == "$host" ]]; then
    ns=${entry#*=}
    # like ssh: the words make one command line for a shell on the "host"
    exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$0" && eval "$1"' "$ns" "$*"
  fi
done
echo "netns-rsh.sh: host '$host' is not in NETNS_RSH_HOSTS ('${NETNS_RSH_HOSTS:-}')" >&2
exit 255
