"""profilectl's start-up hook for every Python process of a profiled job (on PYTHONPATH).

Python imports `sitecustomize` at start-up in every interpreter, so this file reaches the ranks a
launcher starts (torchrun's workers, mpirun's and srun's tasks) without touching the user's command.
It is standalone on purpose: it runs in the workload's interpreter, where profilectl may not be
installed. It first runs the sitecustomize it shadows (Debian ships one), then, in a process that
is a rank of this run, waits for `torch` to be imported and:

- PROFILECTL_TORCH_OUT set: runs torch.profiler and exports a Chrome trace per rank,
  <host>-rank<R>-<pid>.pt.trace.json, at exit (also on SIGTERM: a launcher stopping the other
  ranks after one failed still gets their partial traces);
- PROFILECTL_TORCH_OPTIONS (JSON, built by the torch backend and shown by --dry-run): torch.profiler's
  own switches (record_shapes, with_stack, profile_memory, with_flops, with_modules, acc_events: all
  off unless asked, each costs time in every profiled op or at the stop) and `first_steps`: without
  PROFILECTL_STEPS, record from the start to the end of that many steps, then run the rest of the
  loop unprofiled (a workload that never steps is recorded to its end); null records every step.
  The trace is exported once the workload has ended (atexit), never inside its loop. `window_close`
  "pause" (the backend's default): where torch has toggle_collection_dynamic (>= 2.4), the window's
  end (first_steps, or B of --steps A:B) pauses collection instead of stopping the profiler there,
  and the profiler stops at exit: Kineto's stop costs about as long as the steps it recorded, and
  inside the loop it was most of the trace's cost to the loop ("pause-cpu" pauses the CPU operators
  only, so kernels are recorded to the end; "stop", or older torch: the schedule's stop);
  `memory_history` N (trace --memory): torch's CUDA caching allocator records its last N events with
  their stacks (torch.cuda.memory._record_memory_history) and the snapshot is written at exit,
  <host>-rank<R>-<pid>.memory.pickle, and at the first out-of-memory error (torch's OOM observer),
  <host>-rank<R>-<pid>.oom.memory.pickle: the allocations alive when it failed; each with a
  "profilectl" entry holding torch.cuda.max_memory_allocated/reserved per device;
- PROFILECTL_STEPS=A:B: profiles only steps A..B-1 (a step ends at each optimizer.step(), or at
  profilectl.step() for loops without an optimizer); PROFILECTL_STEP_ACTION says what the window
  drives: torch (torch.profiler's schedule), cuda-profiler (cudaProfilerStart/Stop, for
  `ncu --profile-from-start off`), roctx (roctxProfilerResume/Pause, for rocprofv3
  --selected-regions), nvtx (an NVTX range named PROFILECTL_NVTX_STEPS over the window, for
  `nsys --capture-range=nvtx`);
- PROFILECTL_RANGE=NAME: the window is each record_function / torch.profiler.record_function range
  of that name instead of steps (the outermost one where they nest): torch-range starts a
  torch.profiler when one is entered and exports its trace, <host>-rank<R>-<pid>.range<K>.pt.trace.json,
  when it is left; roctx and cuda-profiler switch rocprofv3's / ncu's window as for steps;
- writes rank-<R>-<host>-<pid>.status.json (exit code or exception, when it failed or was stopped,
  and when each step ended) so a run knows which rank failed first and how long its steps took:
  into PROFILECTL_TORCH_OUT, or PROFILECTL_STATUS_OUT when only the steps are timed (the `profile`
  service: no profiler at all);
- appends, as each step ends, one line to rank-<R>-<host>-<pid>.steps.jsonl in the same folder
  (`profilectl watch` and --live follow these while the job runs): a first line that says who the
  rank is ({"rank", "host", "pid", "local_rank", "visible_devices"}), then
  {"step": N, "end_unix_ns": time.time_ns(), "end_mono_ns": perf_counter_ns} per step; one write per
  line, at most MAX_STEP_MARKS lines; a write that fails ends the file, never the workload;
- a workload that starts torch.profiler itself: only one Kineto profiler can run in a process, so
  profilectl's steps aside (exporting what it recorded so far) and notes in the status file where
  the workload's own traces were exported, for `profilectl` to read them.

Which processes count as ranks: those with one of PROFILECTL_RANK_ENV's variables set, or every
process when PROFILECTL_SINGLE=1 (a plain `python train.py`). A profiled process sets
PROFILECTL_PROFILED, so its own children (DataLoader workers, subprocesses) are not profiled again.
"""

import atexit
import importlib.abc
import importlib.util
import json
import os
import signal
import socket
import sys
import time

MAX_STEP_MARKS = 100_000  # a bound on the status file, for loops of millions of tiny steps
STEPS_SUFFIX = ".steps.jsonl"  # read/live.py reads these by this name
VISIBLE_DEVICES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def _debug(message):
    """PROFILECTL_HOOK_DEBUG=1: say what the hook decides (why a window did or did not open)."""
    if os.environ.get("PROFILECTL_HOOK_DEBUG") == "1":
        sys.stderr.write(f"profilectl hook [{os.getpid()}]: {message}\n")
        sys.stderr.flush()


def _chain_shadowed_sitecustomize():
    """Run the sitecustomize this file hides (e.g. Debian's /usr/lib/python3.X/sitecustomize.py)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_profilectl_shadowed_sitecustomize", candidate)
            if spec and spec.loader:
                try:
                    spec.loader.exec_module(importlib.util.module_from_spec(spec))
                except Exception as exc:  # a broken site hook must not stop the user's program
                    sys.stderr.write(f"profilectl: the shadowed {candidate} failed: {exc}\n")
            return


def _rank():
    if os.environ.get("PROFILECTL_PROFILED"):
        return None  # a child of a profiled rank
    for name in filter(None, os.environ.get("PROFILECTL_RANK_ENV", "").split(",")):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    return "0" if os.environ.get("PROFILECTL_SINGLE") == "1" else None


class _Window:
    """The step window: which steps run with the profiler on."""

    def __init__(self, spec):
        first, _, last = (spec or "").partition(":")
        self.first = int(first) if first else None
        self.last = int(last) if last else None
        self.step = 0

    @property
    def bounded(self):
        return self.first is not None


class _RankProfiler:
    def __init__(self, rank, out_dir):
        self.rank = rank
        self.out_dir = out_dir
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.status_dir = os.environ.get("PROFILECTL_STATUS_OUT") or out_dir
        self.step_ends_ns = []  # perf_counter_ns (CLOCK_MONOTONIC) at the end of each step
        self.steps_fd = None  # rank-<R>-<host>-<pid>.steps.jsonl, opened at the first step
        self.steps_bytes = 0  # written to it: a line the disk took only in part is cut back to here
        self.steps_failed = False  # a write failed (a full disk, a name taken): no more lines
        self.window = _Window(os.environ.get("PROFILECTL_STEPS"))
        self.action = os.environ.get("PROFILECTL_STEP_ACTION", "torch")
        self.profiler = None
        self.mine = None  # profilectl's own torch.profiler, also after it stepped aside
        self.exported = False
        self.exit_code = None
        self.error = None
        self.active = False  # for cuda-profiler / roctx windows
        self.started = False  # torch was imported here: this process is the rank's
        self.finishing = False  # atexit is exporting: a SIGTERM now must not cut the export short
        self.failed_unix_ns = None  # wall clock (time.time_ns) when the exception or signal arrived
        self.signal = None
        self.own_profiler_step = None  # the step at which the workload started its own torch.profiler
        self.own_traces = []  # where the workload exported its own traces
        self.options = _torch_options()
        self.ready = None  # the torch.profiler whose window closed: exported at exit, off the loop's path
        self.costs = {"start_s": 0.0, "steps_s": 0.0, "stop_s": 0.0, "export_s": 0.0}  # the profiler's own time
        self.close = "stop"
        self.close_at = None  # the step whose end closes the window without stopping the profiler in the loop
        self.closed = False
        self.activities = []
        self.memory_on = False  # torch's CUDA memory history is recording (trace --memory)
        self.oom_written = False

    # ------------------------------------------------------------ starting
    def start(self, torch):
        # Claimed only now: a Python process that never imports torch (ncu's own helper, a wrapper
        # script) must not mark the rank's real process, its child, as already profiled.
        os.environ["PROFILECTL_PROFILED"] = str(os.getpid())
        self.started = True
        self.torch = torch
        _debug(f"torch imported: rank {self.rank}, action {self.action}, steps {os.environ.get('PROFILECTL_STEPS')}")
        if self.out_dir and self.action == "torch":
            from torch.profiler import ProfilerAction, ProfilerActivity, profile, schedule
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():  # ROCm builds report their GPUs through the CUDA API too
                activities.append(ProfilerActivity.CUDA)
            accepted = _parameters(profile)
            kwargs = {"activities": activities}
            for name in PROFILE_SWITCHES:  # what torch.profiler takes, as the backend set it (default off)
                if name in accepted:
                    kwargs[name] = bool(self.options.get(name, False))
            # The window's trace is kept, not exported, until the workload ends: an export inside the
            # loop stops the workload for as long as writing the trace takes.
            kwargs["on_trace_ready"] = self._keep
            if self.window.bounded:
                # One warm-up step before the window when there is one: torch.profiler skews (and
                # shifts by a step) a window that starts without it.
                first = self.window.first
                active = (self.window.last - first) if self.window.last else 1 << 30
                kwargs["schedule"] = schedule(wait=max(first - 1, 0), warmup=1 if first else 0, active=active, repeat=1)
            else:
                # Recording from the start, through a schedule: torch marks ProfilerStep#N ranges only
                # when it has one, and the per-step breakdown (and HTA) read those. Bounded to the
                # first steps unless every step was asked for.
                kwargs["schedule"] = _first_steps(ProfilerAction, self.options.get("first_steps"))
            close = _window_close(self.options.get("window_close"), profile)
            closes_at = self.window.last if self.window.bounded else self.options.get("first_steps")
            if close != "stop" and closes_at:
                # The window's end must not stop the profiler inside the loop (Kineto's stop costs about
                # as long as the steps it recorded): the schedule records on, and on_step closes it.
                self.close_at, self.close = closes_at, close
                kwargs["schedule"] = _record_on(ProfilerAction, self.window.first if self.window.bounded else 0)
            self.activities = activities
            self._start_memory_history(torch)
            self.profiler = self.mine = profile(**kwargs)
            started = time.perf_counter()
            self.profiler.start()
            self.costs["start_s"] = time.perf_counter() - started
            _watch_own_profiler(torch, self)
        elif self.window.bounded and self.window.first == 0:
            self._window_on()
        _install_step_hook(torch, self.on_step)
        if os.environ.get("PROFILECTL_RANGE"):
            _install_range_hook(torch, self, os.environ["PROFILECTL_RANGE"])

    # ------------------------------------------------------------ memory history (trace --memory)
    def _start_memory_history(self, torch):
        entries = self.options.get("memory_history")
        if not entries or not torch.cuda.is_available():
            return
        memory = torch.cuda.memory
        try:
            try:  # torch >= 2.1
                memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                              max_entries=int(entries))
            except TypeError:  # torch 2.0's signature
                memory._record_memory_history(True, trace_alloc_max_entries=int(entries),
                                              trace_alloc_record_context=True)
        except Exception as exc:
            sys.stderr.write(f"profilectl: rank {self.rank}: torch's memory history could not start: {exc}\n")
            return
        self.memory_on = True
        try:
            torch._C._cuda_attach_out_of_memory_observer(self._out_of_memory)
        except Exception as exc:  # the exit's snapshot still comes; the failure's own moment does not
            _debug(f"no out-of-memory observer: {exc}")

    def _out_of_memory(self, device, alloc, device_alloc, device_free):
        """torch's OOM observer: the allocations alive now are the answer; written once."""
        if self.oom_written:
            return
        self.oom_written = True
        self._dump_memory("oom.memory.pickle", {"oom": {"device": device, "requested": alloc,
                                                        "device_allocated": device_alloc, "device_free": device_free}})

    def _dump_memory(self, suffix, extra=None):
        import pickle
        torch = self.torch
        try:
            snapshot = torch.cuda.memory._snapshot()
            devices = range(torch.cuda.device_count())
            snapshot["profilectl"] = dict(extra or {}, rank=self.rank,
                                          max_allocated={str(d): torch.cuda.max_memory_allocated(d) for d in devices},
                                          max_reserved={str(d): torch.cuda.max_memory_reserved(d) for d in devices})
            path = os.path.join(self.out_dir, f"{self.host}-rank{self.rank}-{self.pid}.{suffix}")
            tmp = f"{path}.{os.urandom(8).hex()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(snapshot, fh)
            os.replace(tmp, path)
        except Exception as exc:
            sys.stderr.write(f"profilectl: rank {self.rank}: could not write torch's memory snapshot: {exc}\n")

    # ------------------------------------------------------------ steps
    def on_step(self):
        self.window.step += 1
        ended_ns = time.perf_counter_ns()
        if len(self.step_ends_ns) < MAX_STEP_MARKS:
            self.step_ends_ns.append(ended_ns)
            self._mark_step(ended_ns)
        _debug(f"step {self.window.step} ended")
        if self.profiler is not None and self.action == "torch":
            if self.closed:
                return
            started = time.perf_counter()
            if self.close_at is not None and self.window.step >= self.close_at:
                self._close_window()
            else:
                self.profiler.step()  # the step that closes the window stops the profiler: its cost counts here
            self.costs["steps_s"] += time.perf_counter() - started
            return
        if not self.window.bounded:
            return
        if self.window.step == self.window.first:
            self._window_on()
        elif self.window.last is not None and self.window.step == self.window.last:
            self._window_off()

    def _mark_step(self, ended_ns):
        """One line for the step that just ended in the rank's steps.jsonl (a live view follows it).
        Never raises: the first failure ends the file (the status file still says it all at exit)."""
        if self.steps_failed or not self.status_dir or os.getpid() != self.pid:  # a forked child is not the rank
            return
        try:
            if self.steps_fd is None:
                self._open_steps()
            line = f'{{"step": {self.window.step}, "end_unix_ns": {time.time_ns()}, "end_mono_ns": {ended_ns}}}\n'
            self._write_steps(line.encode())
        except Exception:
            self._close_steps()
            self.steps_failed = True

    def _write_steps(self, data):
        """One whole line, or none: what a full disk took of it is cut back, and the file ends there."""
        try:
            written = os.write(self.steps_fd, data)
        except OSError:
            written = -1
        if written != len(data):
            if written > 0:
                os.ftruncate(self.steps_fd, self.steps_bytes)
            raise OSError("the line was not written whole")
        self.steps_bytes += written

    def _open_steps(self):
        """A new file, never through a link, never one that was there (O_EXCL: the name is predictable)."""
        os.makedirs(self.status_dir, exist_ok=True)
        path = os.path.join(self.status_dir, f"rank-{self.rank}-{self.host}-{self.pid}{STEPS_SUFFIX}")
        self.steps_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW
                                | os.O_CLOEXEC, 0o666)
        local = next((os.environ[n] for n in os.environ.get("PROFILECTL_LOCAL_RANK_ENV", "").split(",")
                      if n and os.environ.get(n, "").strip()), None)
        visible = next((os.environ[n] for n in VISIBLE_DEVICES if n in os.environ), None)
        who = {"rank": self.rank, "host": self.host, "pid": self.pid,
               "local_rank": int(local) if local is not None and local.strip().isdigit() else None,
               "visible_devices": visible}
        self._write_steps((json.dumps(who) + "\n").encode())

    def _close_steps(self):
        fd, self.steps_fd = self.steps_fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _window_on(self):
        if self.active or not self.started:  # no torch in this process: nothing to switch
            return
        self.active = True
        _debug(f"window on ({self.action}) before step {self.window.step}")
        if self.action == "cuda-profiler":
            self.torch.cuda.synchronize()
            self.torch.cuda.cudart().cudaProfilerStart()
        elif self.action == "roctx":
            _roctx("roctxProfilerResume")
        elif self.action == "nvtx":  # Nsight Systems captures this NVTX range (--capture-range=nvtx)
            _nvtx(self.torch, "range_push", os.environ.get("PROFILECTL_NVTX_STEPS", "profilectl.steps"))

    def _window_off(self):
        if not self.active:
            return
        self.active = False
        _debug(f"window off ({self.action}) after step {self.window.step - 1}")
        if self.action == "cuda-profiler":
            self.torch.cuda.synchronize()
            self.torch.cuda.cudart().cudaProfilerStop()
        elif self.action == "roctx":
            _roctx("roctxProfilerPause")
        elif self.action == "nvtx":
            if self.torch.cuda.is_available():  # the window's last kernels end inside the range
                self.torch.cuda.synchronize()
            _nvtx(self.torch, "range_pop")

    def _close_window(self):
        """The window's last step ended: end its ProfilerStep range and pause collection; the
        profiler stops at exit, off the loop's path."""
        self.closed = True
        profiler = self.profiler
        step_range = getattr(profiler, "step_rec_fn", None)
        if step_range is not None:
            step_range.__exit__(None, None, None)
            profiler.step_rec_fn = None
        cpu = self.torch.profiler.ProfilerActivity.CPU
        paused = [a for a in self.activities if self.close == "pause" or a == cpu]
        if len(paused) > 1 and self.torch.cuda.is_available():
            self.torch.cuda.synchronize()  # the window's last kernels finish while CUDA is still recorded
        try:
            profiler.toggle_collection_dynamic(False, paused)
        except Exception as exc:  # the window then records on to the exit: a longer trace, a whole run
            sys.stderr.write(f"profilectl: rank {self.rank}: could not pause torch.profiler: {exc}\n")
        _debug(f"window paused after step {self.window.step}: {[str(a) for a in paused]}")

    def _stopped(self):
        """Stop the profiler: returns the profile to export."""
        cuda = [a for a in self.activities if a != self.torch.profiler.ProfilerActivity.CPU]
        if self.closed and self.close == "pause" and cuda:
            self.profiler.toggle_collection_dynamic(True, cuda)  # what CUPTI buffered is read at the stop
        started = time.perf_counter()
        self.profiler.stop()  # an unfinished schedule window still exports what it has
        self.costs["stop_s"] = time.perf_counter() - started
        return self.ready or self.profiler

    # ------------------------------------------------------------ the end
    def trace_path(self):
        return os.path.join(self.out_dir, f"{self.host}-rank{self.rank}-{self.pid}.pt.trace.json")

    def _keep(self, prof):
        """torch.profiler's on_trace_ready: the window closed; the export waits for the workload's end."""
        self.ready = prof

    def _export(self, prof):
        if self.exported:
            return
        self.exported = True
        try:
            if self.torch.cuda.is_available():
                self.torch.cuda.synchronize()
        except Exception:
            pass
        started = time.perf_counter()
        _export_chrome_trace(self.torch, prof, self.trace_path())
        self.costs["export_s"] += time.perf_counter() - started

    def yield_to_workload(self):
        """The workload starts torch.profiler itself: stop ours first (Kineto runs one profiler per
        process; both at once end in "Can't disable Kineto profiler when it's not running")."""
        if self.profiler is None:
            return
        self.own_profiler_step = self.window.step
        _debug(f"the workload starts its own torch.profiler at step {self.window.step}: profilectl's steps aside")
        try:
            ours = self._stopped()
            self.profiler = None
            if not self.exported:
                self._export(ours)
        except Exception as exc:
            sys.stderr.write(f"profilectl: rank {self.rank}: could not stop its torch.profiler for the workload's: "
                             f"{exc}\n")

    def _profiled_steps(self):
        """[first, end) of the steps our torch.profiler recorded (None: not ours, or not known)."""
        if not self.mine:
            return None
        if self.window.bounded:
            return [self.window.first, self.window.last if self.window.last is not None else self.window.step]
        first_steps = self.options.get("first_steps")
        return [0, min(int(first_steps), self.window.step)] if first_steps else [0, self.window.step]

    def finish(self):
        if not self.started and not self.step_ends_ns:
            return  # a process of the job that neither imported torch nor marked a step: nothing to say
        self.finishing = True
        if self.memory_on:
            self._dump_memory("memory.pickle")
        if self.profiler is not None:
            try:
                ours = self._stopped()
                if not self.exported:
                    self._export(ours)
            except Exception as exc:
                sys.stderr.write(f"profilectl: rank {self.rank}: could not export the torch trace: {exc}\n")
        self._window_off()
        self._close_steps()
        if self.exit_code is None:
            self.exit_code = 1 if self.error else 0  # ran to its end: no sys.exit, no exception
        if self.status_dir:
            status = {"rank": self.rank, "host": self.host, "pid": self.pid, "exit_code": self.exit_code,
                      "error": self.error, "trace": os.path.basename(self.trace_path()) if self.exported else None,
                      "steps": self.window.step, "step_ends_ns": self.step_ends_ns,
                      "ended_unix_ns": time.time_ns(), "failed_unix_ns": self.failed_unix_ns, "signal": self.signal,
                      "own_profiler_step": self.own_profiler_step, "own_traces": self.own_traces,
                      "profiler_costs_s": {k: round(v, 6) for k, v in self.costs.items()} if self.mine else None,
                      "profiled_steps": self._profiled_steps()}
            path = os.path.join(self.status_dir, f"rank-{self.rank}-{self.host}-{self.pid}.status.json")
            # a reader never sees half a file: a new temporary (an unpredictable name, never through a
            # link: files.write_into's rule, with the standard library alone), then renamed
            tmp = f"{path}.{os.urandom(8).hex()}.tmp"
            try:
                os.makedirs(self.status_dir, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
                with os.fdopen(fd, "w") as fh:
                    json.dump(status, fh)
                os.replace(tmp, path)
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _nvtx(torch, function, *args):
    """torch.cuda.nvtx's range_push/range_pop; a torch built without NVTX (a CPU build) leaves the
    step window unmarked, said once on stderr, and the workload runs on."""
    try:
        getattr(torch.cuda.nvtx, function)(*args)
    except Exception as exc:
        if function == "range_push":
            sys.stderr.write(f"profilectl: no NVTX in this PyTorch ({exc}): the --steps window is not marked\n")


def _roctx(function):
    import ctypes
    for name in ("libroctx64.so", "libroctx64.so.4", "librocprofiler-sdk-roctx.so"):
        try:
            getattr(ctypes.CDLL(name), function)(0)
            return
        except (OSError, AttributeError):
            continue


def _parameters(function):
    import inspect
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}


# torch.profiler's switches the backend may turn on (PROFILECTL_TORCH_OPTIONS); each is off unless set.
PROFILE_SWITCHES = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules", "acc_events")


def _torch_options():
    try:
        options = json.loads(os.environ.get("PROFILECTL_TORCH_OPTIONS") or "{}")
    except ValueError:
        sys.stderr.write("profilectl: PROFILECTL_TORCH_OPTIONS is not JSON; torch.profiler's defaults used\n")
        return {}
    return options if isinstance(options, dict) else {}


USER_SCOPE = 7  # torch's RecordScope of a record_function range (ProfilerStep#N too)


def _export_chrome_trace(torch, prof, path):
    """torch's own export, except where torch has no Kineto (Debian's 1.13): its legacy export has no
    categories, so a record_function range could not be told from an operator. There the profile's
    own events are written in Kineto's layout: a USER_SCOPE range as "user_annotation", the rest as
    "cpu_op" (the same events, times and threads as torch's file)."""
    kineto = getattr(torch.autograd, "kineto_available", lambda: True)
    if kineto():
        prof.export_chrome_trace(path)
        return
    import json
    pid = os.getpid()
    with open(path, "w") as fh:
        fh.write('{"schemaVersion": 1, "traceEvents": [')
        first = True
        for event in prof.events():
            if event.trace_name is None:
                continue
            category = "user_annotation" if getattr(event, "scope", 0) == USER_SCOPE else "cpu_op"
            fh.write(("" if first else ",\n") + json.dumps(
                {"ph": "X", "cat": category, "name": event.trace_name, "pid": pid, "tid": event.thread,
                 "ts": event.time_range.start, "dur": event.time_range.elapsed_us(), "args": {}}))
            first = False
        fh.write("]}\n")


def _first_steps(action, count):
    """Record from the start; with a count, the window closes at the end of step `count` (the rest of
    the loop runs unprofiled), and a workload that never steps is recorded to its end."""
    def schedule(step):
        if not count or step < count - 1:
            return action.RECORD
        return action.RECORD_AND_SAVE if step == count - 1 else action.NONE
    return schedule


def _window_close(asked, profile):
    """How the window closes: "pause" (CPU and CUDA collection paused, the profiler stopped at
    exit), "pause-cpu" (CPU operators paused, kernels recorded on) — both need
    toggle_collection_dynamic (torch >= 2.4) — or "stop" (torch.profiler's schedule stops it inside
    the loop, as older torch must)."""
    asked = "pause" if asked is None else asked  # an override of the options that leaves it out
    if asked not in ("pause", "pause-cpu"):
        return "stop"
    if not hasattr(profile, "toggle_collection_dynamic"):
        _debug("this torch cannot pause collection: the window's end stops the profiler")
        return "stop"
    return asked


def _record_on(action, first):
    """The schedule of a window that on_step closes: warm-up the step before the first, then record."""
    def schedule(step):
        return action.NONE if step < first - 1 else action.WARMUP if step < first else action.RECORD
    return schedule


def _watch_own_profiler(torch, rank_profiler):
    """Wrap torch.profiler's start (and the legacy autograd profiler's __enter__) so that a workload
    starting its own profiler gets the process to itself, and its exports so that their paths are
    known. Any failure here leaves torch as it was."""
    def wrap_start(cls, attribute):
        original = getattr(cls, attribute, None)
        if original is None or getattr(original, "_profilectl", False):
            return

        def start(self, *args, **kwargs):
            if self is not rank_profiler.mine:
                rank_profiler.yield_to_workload()
            return original(self, *args, **kwargs)
        start._profilectl = True
        setattr(cls, attribute, start)

    depth = [0]  # torch.profiler's export calls the autograd profiler's: only the outermost path counts

    def wrap_export(cls):
        original = getattr(cls, "export_chrome_trace", None)
        if original is None or getattr(original, "_profilectl", False):
            return

        def export(self, path, *args, **kwargs):
            depth[0] += 1
            try:
                result = original(self, path, *args, **kwargs)
            finally:
                depth[0] -= 1
            outermost_of_workload = depth[0] == 0 and self is not rank_profiler.mine and \
                getattr(rank_profiler.mine, "profiler", None) is not self
            if outermost_of_workload and len(rank_profiler.own_traces) < 1000:
                rank_profiler.own_traces.append(os.path.abspath(str(path)))
            return result
        export._profilectl = True
        cls.export_chrome_trace = export
    try:
        import torch.autograd.profiler as autograd_profiler
        import torch.profiler.profiler as profiler_module
        wrap_start(profiler_module.profile, "start")
        wrap_start(autograd_profiler.profile, "__enter__")
        wrap_export(profiler_module._KinetoProfile)
        wrap_export(autograd_profiler.profile)
    except Exception as exc:  # another torch layout: the collision is then reported from stderr
        _debug(f"could not watch the workload's own torch.profiler: {exc}")


def _install_step_hook(torch, callback):
    """A step ends at every optimizer.step(): torch >= 2.0 has a global post-hook; older releases
    get each optimizer class's step wrapped the first time one is built."""
    import functools
    import torch.optim.optimizer as optimizer_module
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:
        register(lambda optimizer, args, kwargs: callback())
        return
    base = optimizer_module.Optimizer
    original_init = base.__init__
    wrapped = set()

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        cls = type(self)
        if cls not in wrapped:
            wrapped.add(cls)
            step = cls.step

            @functools.wraps(step)
            def stepped(self, *a, **k):
                result = step(self, *a, **k)
                callback()
                return result
            cls.step = stepped

    base.__init__ = init


RANGE_WINDOWS_MAX = 100  # torch-range: traces per rank at most (a range entered every step would write thousands)


def _install_range_hook(torch, rank_profiler, name):
    """The profiling window follows the record_function ranges named `name`: on when the outermost
    one is entered (before it, so the range itself is in the trace), off when it is left."""
    cls = torch.autograd.profiler.record_function  # torch.profiler.record_function is this class
    original_enter, original_exit = cls.__enter__, cls.__exit__
    state = {"depth": 0, "busy": False}

    def enter(self):
        if getattr(self, "name", None) == name and not state["busy"]:
            state["depth"] += 1
            if state["depth"] == 1:
                _range_switch(torch, rank_profiler, state, True)
        return original_enter(self)

    def exit_(self, *exc):
        result = original_exit(self, *exc)
        if getattr(self, "name", None) == name and not state["busy"] and state["depth"] > 0:
            state["depth"] -= 1
            if state["depth"] == 0:
                _range_switch(torch, rank_profiler, state, False)
        return result

    cls.__enter__, cls.__exit__ = enter, exit_
    atexit.register(lambda: state["depth"] and _range_switch(torch, rank_profiler, state, False))  # left open


def _range_switch(torch, rank_profiler, state, on):
    """One range window on or off: its own torch.profiler (torch-range), or the step window's switch."""
    state["busy"] = True  # torch.profiler enters record_functions of its own meanwhile
    try:
        if rank_profiler.action != "torch-range":
            (rank_profiler._window_on if on else rank_profiler._window_off)()
        elif on and state.get("windows", 0) < RANGE_WINDOWS_MAX and rank_profiler.out_dir:
            from torch.profiler import ProfilerActivity, profile
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            state["profile"] = profile(activities=activities, record_shapes=False)
            state["profile"].start()
        elif not on and state.get("profile") is not None:
            prof, state["profile"] = state["profile"], None
            if torch.cuda.is_available():
                torch.cuda.synchronize()  # the range's kernels end inside the window
            prof.stop()
            state["windows"] = state.get("windows", 0) + 1
            base = rank_profiler.trace_path()[:-len(".pt.trace.json")]
            _export_chrome_trace(torch, prof, f"{base}.range{state['windows']}.pt.trace.json")
            _debug(f"range window {state['windows']} exported")
    except Exception as exc:  # the workload goes on without this window
        sys.stderr.write(f"profilectl: rank {rank_profiler.rank}: range window: {exc}\n")
    finally:
        state["busy"] = False


class _AfterTorchImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Starts the rank's profiler once `import torch` has finished: importing torch ourselves would
    cost every Python process of the job (the launcher's own included) seconds at start-up."""

    def __init__(self, on_import):
        self.on_import = on_import
        self.spec = None

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.spec is not None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec("torch")
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.spec = spec
        self.inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        sys.meta_path.remove(self)
        try:
            self.on_import(module)
        except Exception as exc:
            sys.stderr.write(f"profilectl: could not start profiling in this rank: {exc}\n")


def _main():
    _chain_shadowed_sitecustomize()
    rank = _rank()
    # the program's name only: its arguments may hold secrets (profilectl redacts what it writes)
    _debug(f"program {os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else '?'}: rank {rank}")
    if rank is None:
        return
    out_dir = os.environ.get("PROFILECTL_TORCH_OUT")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    rank_profiler = _RankProfiler(rank, out_dir)
    import builtins
    builtins._profilectl_step = rank_profiler.on_step  # profilectl.step() finds it here, torch or not

    def on_exit():
        rank_profiler.finish()
    atexit.register(on_exit)

    previous_excepthook = sys.excepthook

    def excepthook(kind, value, tb):
        rank_profiler.failed_unix_ns = rank_profiler.failed_unix_ns or time.time_ns()
        rank_profiler.error = f"{kind.__name__}: {value}"[:500]
        rank_profiler.exit_code = 1
        previous_excepthook(kind, value, tb)
    sys.excepthook = excepthook

    def on_term(signum, frame):
        # A timeout, Ctrl-C or a launcher stopping the job: unwind, so atexit exports the partial trace.
        # Once atexit is exporting, a second signal (torchrun sends SIGTERM to every worker after one
        # failed) must not cut the export short: the launcher's SIGKILL after its grace period remains.
        if rank_profiler.signal is None:
            rank_profiler.signal = signum
            rank_profiler.failed_unix_ns = rank_profiler.failed_unix_ns or time.time_ns()
        if rank_profiler.finishing:
            return
        rank_profiler.exit_code = 128 + signum
        raise SystemExit(128 + signum)
    for signum in (signal.SIGTERM,):
        try:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                signal.signal(signum, on_term)
        except (ValueError, OSError):
            pass
    if "torch" in sys.modules:  # imported already (by the sitecustomize this one shadows, say)
        rank_profiler.start(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorchImport(rank_profiler.start))

    original_exit = sys.exit

    def recording_exit(code=0):
        rank_profiler.exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        original_exit(code)
    sys.exit = recording_exit


_main()
