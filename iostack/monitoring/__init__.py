"""Workload metrics (ARCHITECTURE §3.7): not built yet; no issue has asked for it so far."""
