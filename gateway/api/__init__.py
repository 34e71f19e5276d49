"""The HTTP API (FastAPI): sites, readings, findings, alerts, health, metrics."""
