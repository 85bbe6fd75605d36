#!/usr/bin/env python3
"""Entrypoint of the profilectl image: the service's command line, the user it runs as, and the
ownership of everything it leaves on the host.

- The command: `docker compose run --rm SERVICE -- PROGRAM ARGS` (or `... SERVICE PROGRAM ARGS`, or
  `... SERVICE --preset api -- PROGRAM`) runs `profilectl SERVICE [its default options] ... -- PROGRAM
  ARGS`: the service comes from $PROFILECTL_SERVICE (set by each compose service), its default
  options from $PROFILECTL_SERVICE_OPTIONS. A command line that starts with a profilectl command
  (`env-check --json`, `counters`, `report ...`) is run as written.
- The user: compose starts every service as root, only so that this entrypoint can adopt a folder
  Docker created (below); a service that does not need root then drops to the host user:
  $PROFILECTL_HOST_UID/GID (HOST_UID/HOST_GID), else the owner of the traces folder, else of the
  application folder (the user's project). Started as another user (`docker compose run --user`),
  it runs as that user.
- Only the `counters` command of the counters service (and its env-check, which runs nothing of the
  user's) starts profilectl as root (hardware counters may need a capability, and cap_add gives
  nothing to another user): this entrypoint execs it, so no root process of ours waits beside the
  workload. profilectl probes as root, then becomes the host
  user itself, keeping only the capability the plan says the profiler needs here, if any
  (profilectl/privilege.py, docs/threat-model.md), so every file is the host user's as it is written:
  a `docker kill` or an OOM kill leaves nothing root-owned, and nothing needs handing back. Any other
  command of that service (`report`, `ls`, ...) runs as the host user like every other service.
- A mount point Docker created for a missing host folder (root-owned and empty) is given to the
  host user first, so the user can write into it and delete what the run leaves there.
"""

import os
import shlex
import sys

COMMANDS = {"env-check", "profile", "counters", "trace", "ls", "report", "compare", "docker"}
PASS_THROUGH = {"-h", "--help", "--version"}
# hardware counters may need a capability (cap_add gives nothing to another user); env-check says what
# counters would find, and runs nothing of the user's
ROOT_COMMANDS = {"counters", "env-check"}
PROFILECTL = os.environ.get("PROFILECTL_BIN", "profilectl")
TRACES = os.environ.get("PROFILECTL_TRACES_DIR", "/workspace/traces")
APP = os.environ.get("PROFILECTL_APP_MOUNT", "/workspace/app")


def command_line(args, env):
    service = env.get("PROFILECTL_SERVICE", "")
    if not service or (args and (args[0] in COMMANDS or args[0] in PASS_THROUGH)):
        return list(args)
    options = shlex.split(env.get("PROFILECTL_SERVICE_OPTIONS", ""))
    if not args or args[0].startswith("-"):  # `--`, or the service's own options first
        return [service, *options, *args]
    return [service, *options, "--", *args]  # a program


def host_owner(env):
    uid, gid = env.get("PROFILECTL_HOST_UID", ""), env.get("PROFILECTL_HOST_GID", "")
    if uid.isdigit():
        return int(uid), int(gid) if gid.isdigit() else int(uid)
    for folder in (TRACES, APP):
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if st.st_uid != 0:
            return st.st_uid, st.st_gid
    return None


def adopt_empty_mounts(owner):
    """A root-owned, empty mount point is one Docker made for a missing host folder: the user's."""
    for folder in (TRACES, APP):
        try:
            st = os.stat(folder)
            if st.st_uid == 0 and not os.listdir(folder):
                os.chown(folder, *owner)
        except OSError:
            pass


def _ownership():
    """profilectl's ownership module, from the checkout or image this entrypoint belongs to."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if os.path.isdir(os.path.join(src, "profilectl")) and src not in sys.path:
        sys.path.insert(0, src)
    from profilectl import ownership
    return ownership


def private_home():
    """A writable HOME for a user the image has no account for (caches of torch, triton, pip)."""
    home = os.environ.get("HOME", "")
    if not home or not os.access(home, os.W_OK):
        home = f"/tmp/home-{os.getuid()}"
        os.makedirs(home, mode=0o700, exist_ok=True)
        os.environ["HOME"] = home


def drop_to(owner):
    uid, gid = owner
    # the groups that own the GPU device nodes (compose's group_add): all a dropped user keeps, never root's own
    os.setgroups(_ownership().device_groups())
    os.setgid(gid)
    os.setuid(uid)


def main():
    args = command_line(sys.argv[1:], os.environ)
    argv = [PROFILECTL, *args]
    owner = host_owner(os.environ)
    if os.getuid() == 0 and owner and owner[0] != 0:
        adopt_empty_mounts(owner)
        if args and args[0] in ROOT_COMMANDS and os.environ.get("PROFILECTL_SERVICE") == "counters":
            # profilectl becomes the user itself once it has probed (it is told who by these)
            os.environ.update(PROFILECTL_HOST_UID=str(owner[0]), PROFILECTL_HOST_GID=str(owner[1]))
        else:
            drop_to(owner)
    measuring = bool(args) and args[0] in ("profile", "counters", "trace")
    if measuring and os.getuid() != 0 and os.path.isdir(TRACES) and not os.access(TRACES, os.W_OK | os.X_OK):
        host = os.environ.get("PROFILECTL_TRACES_ON_HOST", TRACES)
        sys.stderr.write(f"profilectl: the traces folder {host} is not writable by uid {os.getuid()}: create it on the "
                         f"host as that user before `docker compose run` (tools/profilectl docker does)\n")
        return 2
    private_home()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"profilectl: cannot start {argv[0]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main())
