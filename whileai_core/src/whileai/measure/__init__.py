"""Measurements over rows: every call reads the five row keys and groups by ``task_key``."""
