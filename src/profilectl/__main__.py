from profilectl.cli import entry

raise SystemExit(entry())
