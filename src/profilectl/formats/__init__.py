"""Readers of each tool's own files into normalized tables (rows of plain dicts).

Columns are read by header name, never by position: rocprofv3's column sets changed between ROCm
6.2, 6.3 and 7.0. A file that is not what its name says raises FormatError naming file and line.
"""

from profilectl.formats.common import FormatError, KernelStats, aggregate_kernels

__all__ = ["FormatError", "KernelStats", "aggregate_kernels"]
