"""GPU telemetry while a service runs: power, energy, memory used, clocks, temperature, utilisation.

- model.py    the frozen values: the sampling plan, a GPU's readings, the power summary
- plan.py     which source would sample here (cheap: nothing is imported or started)
- nvml.py     NVIDIA, through nvidia-ml-py (pynvml)
- amdsmi.py   AMD: the amdsmi library, else the `amd-smi` command, else `rocm-smi`
- sampler.py  the background sampler: telemetry.csv in the run directory, stopped on every ending
- energy.py   telemetry.csv -> PowerSummary (energy from counters or the trapezoid rule), per step

This package's __init__ imports nothing, so read/summary.py can use the model alone.
"""
