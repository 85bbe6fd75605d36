#!/bin/bash
# Entrypoint of every container of the SLURM test cluster (mounted from docker/slurm/ by
# compose.slurm.yml, so edits need no image rebuild):
#   entrypoint.sh keygen      one-shot: create the cluster's MUNGE key in the shared volume
#   entrypoint.sh slurmctld   MUNGE + the controller, in the foreground
#   entrypoint.sh slurmd      MUNGE + a compute node daemon, in the foreground
set -euo pipefail
shared_key=/run/munge-key/munge.key  # named volume `munge-key`, mounted read-only except in keygen

start_munge() {
  [ -s "$shared_key" ] || { echo "entrypoint: no MUNGE key at $shared_key (the keygen service did not run)" >&2; exit 1; }
  # munged refuses a key readable by anyone but its owner and a key directory others can write:
  # copy the shared key into place with the ownership and mode it insists on.
  install -o munge -g munge -m 0400 "$shared_key" /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
  # munged must not run as root; it daemonizes. Its socket (/run/munge/munge.socket.2) is
  # world-accessible, which slurmctld (as user slurm) and slurmd/srun (as root) both need.
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do munge -n </dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "entrypoint: munged did not start:" >&2; cat /var/log/munge/munged.log >&2 || true; exit 1
}

case "${1:-}" in
  keygen)
    # Generated at cluster start, not at build time: a key baked into the image would be the same
    # for every cluster ever started from it. Kept across restarts of the cluster's containers,
    # removed by `cluster.sh down` (down -v).
    if [ ! -s "$shared_key" ]; then
      head -c 1024 /dev/urandom > "$shared_key.tmp" && chmod 0400 "$shared_key.tmp" && mv "$shared_key.tmp" "$shared_key"
      echo "entrypoint: created a new MUNGE key"
    fi ;;
  slurmctld)
    start_munge
    install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
    # -D: foreground, logs on stderr (docker logs). State starts empty with each new container.
    exec slurmctld -D ;;
  slurmd)
    start_munge
    install -d /var/spool/slurmd
    # slurmd runs as root (it starts tasks as the submitting user). -D: foreground, logs on stderr.
    exec slurmd -D ;;
  *)
    exec "$@" ;;
esac
