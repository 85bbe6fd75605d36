#!/usr/bin/env bash
# A real SLURM cluster (controller + 2 compute nodes) in Docker Compose, for tests and demos.
#
# usage: docker/slurm/cluster.sh up          build what is missing, start, wait until both nodes are idle
#        docker/slurm/cluster.sh down        stop and remove containers, network and volumes
#        docker/slurm/cluster.sh status      containers, sinfo, squeue
#        docker/slurm/cluster.sh exec CMD... run CMD in the controller, e.g. exec srun -N2 -n4 hostname
#        docker/slurm/cluster.sh build       (re)build the project image and the SLURM image (cached)
#        docker/slurm/cluster.sh logs [SVC]  daemon logs (slurmctld, node1, node2)
#
# Environment:
#   PROFILECTL_IMAGE            project image the node image is built FROM (default profilectl:local)
#   PROFILECTL_SLURM_IMAGE      node image (default profilectl-slurm:local)
#   PROFILECTL_SLURM_IMAGE_REPO node image tagged by what it is built from instead: REPO:<digest of the
#                               Dockerfile, the project image id, the extra packages>; built once, never
#                               replaced or removed here (safe when several clusters share one engine)
#   PROFILECTL_CLUSTER_NAME     compose project and container-name prefix (default profilectl-slurm):
#                               clusters of different names run side by side on one engine
#   PROFILECTL_BASE_IMAGE       base of the project image when it must be built (default: the offline
#                               base profilectl-base:bookworm, from docker/offline-base/build.sh)
#   PROFILECTL_CLUSTER_TRACES   host folder shared as /workspace/traces (default <repo>/traces/cluster)
#   PROFILECTL_CLUSTER_JOBS     host folder shared as /workspace/jobs (default: a volume, removed by down)
#   PROFILECTL_CLUSTER_TIMEOUT  seconds `up` waits for idle nodes (default 120)
#   PROFILECTL_SLURM_EXTRA_PACKAGES  more Debian packages in the node image
#   PROFILECTL_SLURM_KEEP_IMAGE=1    `up` keeps a node image built from an older project image
#                               (by default it is rebuilt, ~3 min, whenever the project image changes)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# Users find the cluster by this name (`docker stop profilectl-slurm-node2`); another name gives a
# second, independent cluster (containers, network and volumes of its own), e.g. one per test session.
project=${PROFILECTL_CLUSTER_NAME:-profilectl-slurm}
[[ "$project" =~ ^[a-z0-9][a-z0-9_-]*$ ]] || { echo "cluster.sh: PROFILECTL_CLUSTER_NAME=$project: use lower-case letters, digits, - and _" >&2; exit 2; }
export PROFILECTL_CLUSTER_NAME=$project
nodes=(node1 node2)

die() { echo "cluster.sh: $*" >&2; exit 1; }

export PROFILECTL_IMAGE=${PROFILECTL_IMAGE:-profilectl:local}
export PROFILECTL_SLURM_IMAGE=${PROFILECTL_SLURM_IMAGE:-profilectl-slurm:local}
export PROFILECTL_SLURM_EXTRA_PACKAGES=${PROFILECTL_SLURM_EXTRA_PACKAGES:-}
export BUILDX_BUILDER=${BUILDX_BUILDER:-default}  # BuildKit of the engine itself: finds locally tagged images
offline_base=profilectl-base:bookworm
timeout=${PROFILECTL_CLUSTER_TIMEOUT:-120}

# Compose resolves relative paths against docker/slurm/: hand it absolute ones, created by the caller
# (so they belong to the caller, not to root via the daemon).
PROFILECTL_CLUSTER_TRACES=$(realpath -m "${PROFILECTL_CLUSTER_TRACES:-$repo/traces/cluster}")
export PROFILECTL_CLUSTER_TRACES
if [ -n "${PROFILECTL_CLUSTER_JOBS:-}" ]; then
  PROFILECTL_CLUSTER_JOBS=$(realpath -m "$PROFILECTL_CLUSTER_JOBS"); export PROFILECTL_CLUSTER_JOBS
fi
make_folders() {
  mkdir -p "$PROFILECTL_CLUSTER_TRACES" || die "cannot create the traces folder $PROFILECTL_CLUSTER_TRACES"
  [ -z "${PROFILECTL_CLUSTER_JOBS:-}" ] || mkdir -p "$PROFILECTL_CLUSTER_JOBS" \
    || die "cannot create the jobs folder $PROFILECTL_CLUSTER_JOBS"
}
# Jobs run as root in the nodes; files they (and profilectl) write are handed to this user.
if [ "$(id -u)" != 0 ]; then export HOST_UID=${HOST_UID:-$(id -u)} HOST_GID=${HOST_GID:-$(id -g)}; fi

compose() { docker compose -p "$project" -f "$here/compose.slurm.yml" "$@"; }
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

check_docker() {
  command -v docker >/dev/null 2>&1 || die "docker is not installed (or not on PATH)"
  local err
  err=$(docker info --format '{{.ServerVersion}}' 2>&1 >/dev/null) \
    || die "cannot reach the Docker engine: $(printf '%s' "$err" | tail -n 1)"
  docker compose version >/dev/null 2>&1 || die "the Docker Compose v2 plugin is missing (\`docker compose\`)"
}

build_project_image() {  # with docker-compose.profiling.yml, exactly as the project builds it
  # Default base: the offline one (this setup has no registry). Another PROFILECTL_BASE_IMAGE (e.g. the
  # public ROCm image) is left to the build, which pulls it where a registry is reachable.
  local base=${PROFILECTL_BASE_IMAGE:-$offline_base}
  if [ "$base" = "$offline_base" ] && ! image_exists "$base"; then
    image_exists "$PROFILECTL_IMAGE" && { echo "cluster.sh: keeping $PROFILECTL_IMAGE (its base $base is gone)" >&2; return; }
    die "project image $PROFILECTL_IMAGE is missing and so is the offline base $base: build the base with docker/offline-base/build.sh (as root), or set PROFILECTL_IMAGE to an existing profilectl image"
  fi
  echo "cluster.sh: building $PROFILECTL_IMAGE FROM $base" >&2
  PROFILECTL_BASE_IMAGE=$base docker compose -p "$project-build" -f "$repo/docker-compose.profiling.yml" \
    --project-directory "$repo" build env-check >&2 || die "building the project image $PROFILECTL_IMAGE failed (output above)"
}

# What the node image is made of: its Dockerfile, the project image (by id) and the extra packages.
# Stored as a label, so `up` rebuilds a stale image (new project image, edited Dockerfile).
inputs_digest() {
  { cat "$here/Dockerfile"; docker image inspect -f '{{.Id}}' "$PROFILECTL_IMAGE"; echo "$PROFILECTL_SLURM_EXTRA_PACKAGES"; } \
    | sha256sum | cut -c1-16
}

build_slurm_image() {
  export PROFILECTL_SLURM_INPUTS; PROFILECTL_SLURM_INPUTS=$(inputs_digest)
  echo "cluster.sh: building $PROFILECTL_SLURM_IMAGE FROM $PROFILECTL_IMAGE" >&2
  local start=$SECONDS old=""
  [ -n "${PROFILECTL_SLURM_IMAGE_REPO:-}" ] || old=$(docker image inspect -f '{{.Id}}' "$PROFILECTL_SLURM_IMAGE" 2>/dev/null || true)
  compose build keygen >&2 || die "building the SLURM image failed (output above)"
  # The image it replaces is 1.3 GB of layers of its own: remove it unless a container still uses it
  # (never a content-addressed one: another cluster may be about to use it).
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$PROFILECTL_SLURM_IMAGE")" ]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi
  echo "cluster.sh: built $PROFILECTL_SLURM_IMAGE in $((SECONDS - start)) s" >&2
}

ensure_images() {
  image_exists "$PROFILECTL_IMAGE" || build_project_image
  if [ -n "${PROFILECTL_SLURM_IMAGE_REPO:-}" ]; then  # immutable: the tag says what it holds
    PROFILECTL_SLURM_IMAGE="$PROFILECTL_SLURM_IMAGE_REPO:$(inputs_digest)"
    image_exists "$PROFILECTL_SLURM_IMAGE" || build_slurm_image
    return
  fi
  local have
  have=$(docker image inspect -f '{{index .Config.Labels "org.profilectl.slurm.inputs"}}' "$PROFILECTL_SLURM_IMAGE" 2>/dev/null || true)
  [ -n "$have" ] || { build_slurm_image; return; }
  # Stale (new project image, edited Dockerfile): rebuilt, ~3 min from scratch, unless told to keep it.
  [ "$have" = "$(inputs_digest)" ] || [ "${PROFILECTL_SLURM_KEEP_IMAGE:-0}" = 1 ] || build_slurm_image
}

controller_running() { [ "$(docker inspect -f '{{.State.Running}}' "$project-ctld" 2>/dev/null)" = true ]; }

node_states() {  # "node1=idle node2=idle", or nothing while the controller does not answer
  compose exec -T slurmctld sinfo -h -N -o '%N=%T' 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//' || true
}

wait_idle() {
  local start=$SECONDS states="" svc state
  while :; do
    states=$(node_states)
    local idle=0
    for n in "${nodes[@]}"; do [[ " $states " == *" $n=idle "* ]] && idle=$((idle + 1)); done
    [ "$idle" = "${#nodes[@]}" ] && { echo "cluster.sh: up in $((SECONDS - start)) s: $states"; return 0; }
    for svc in slurmctld "${nodes[@]}"; do  # a daemon that died will not come back: say so now
      state=$(compose ps -a --format '{{.State}}' "$svc" 2>/dev/null || true)
      if [ -n "$state" ] && [ "$state" != running ]; then
        die "$svc stopped ($state): $(compose logs --no-log-prefix --tail 1 "$svc" 2>&1 | tail -n 1 | sed 's/\x1b\[[0-9;]*[A-Za-z]//g')"
      fi
    done
    if [ $((SECONDS - start)) -ge "$timeout" ]; then
      local why
      why=$(compose exec -T slurmctld sinfo -h -R -o '%n: %E' 2>/dev/null | tr '\n' ';' || true)
      die "nodes not idle after ${timeout} s (sinfo: ${states:-no answer from slurmctld}${why:+; $why}); see docker/slurm/cluster.sh logs"
    fi
    sleep 1
  done
}

where() {  # the paths a user needs next, in the words of whoever called (profilectl cluster passes its own)
  local run=${PROFILECTL_CLUSTER_CALLER:-$0 exec}
  cat <<EOT
cluster.sh: cluster $project; /workspace/traces in every container is $PROFILECTL_CLUSTER_TRACES on this host
cluster.sh: profile every rank of a job (examples/slurm/profile.sbatch is /opt/examples/slurm/profile.sbatch inside):
  $run sbatch --wait --output=/workspace/traces/slurm-%j.out /opt/examples/slurm/profile.sbatch python3 /opt/slurm-cluster/ddp_job.py --steps 3
cluster.sh: or one job step: $run srun -N2 -n4 profilectl trace -- python3 /opt/slurm-cluster/ddp_job.py --steps 3
EOT
}

cmd=${1:-}; [ $# -gt 0 ] && shift
case "$cmd" in
  up)
    check_docker
    make_folders
    ensure_images
    compose up -d --remove-orphans --quiet-pull >&2 || die "docker compose up failed (output above)"
    wait_idle
    where ;;
  down)
    check_docker
    compose down -v --remove-orphans --timeout 5 ;;
  status)
    check_docker
    compose ps -a
    if controller_running; then compose exec -T slurmctld sinfo -N -l; compose exec -T slurmctld squeue; where; fi ;;
  exec)
    [ $# -gt 0 ] || die "usage: cluster.sh exec CMD [ARG...]"
    check_docker
    controller_running || die "the cluster is not up: run docker/slurm/cluster.sh up"
    tty=(-T); [ -t 0 ] && [ -t 1 ] && tty=()
    exec docker compose -p "$project" -f "$here/compose.slurm.yml" exec "${tty[@]}" slurmctld "$@" ;;
  build)
    check_docker
    build_project_image
    if [ -n "${PROFILECTL_SLURM_IMAGE_REPO:-}" ]; then PROFILECTL_SLURM_IMAGE="$PROFILECTL_SLURM_IMAGE_REPO:$(inputs_digest)"; fi
    build_slurm_image ;;
  logs)
    check_docker
    compose logs "$@" ;;
  *)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2 ;;
esac
