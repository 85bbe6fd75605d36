"""Analyses over what the readers found: the timeline (idle, overlap, launch-bound, steps)."""
