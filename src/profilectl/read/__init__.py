"""Reading: any PATH (a run directory, a SLURM job, a profiler's own files) into a Summary, with the
caches, the ranks' partials and the cluster reduction that spare reading raw files again. Below the
renderers (report/), which never read files themselves."""
