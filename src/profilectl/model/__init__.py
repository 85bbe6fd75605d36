"""The values every layer shares and none computes: tables of statistics, the per-rank timeline,
per-rank reductions, collectives' names, the report document and its units. Imports nothing of
profilectl outside itself (tests/unit/test_import_graph.py)."""
