"""Summaries and rendering: rich tables for people, JSON for scripts."""
