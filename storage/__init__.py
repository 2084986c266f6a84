"""Persistent state: the result cache and job records (SQLite)."""
