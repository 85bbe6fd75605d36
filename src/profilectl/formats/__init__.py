"""Readers of each tool's own files into Tables (model/tables.py).

Columns are read by header name, never by position: rocprofv3's column sets changed between ROCm
6.2, 6.3 and 7.0. A file that is not what its name says raises FormatError naming file and line.
Each backend owns its readers (backends/*.py `readers`); backends.READERS lists them all.
"""
