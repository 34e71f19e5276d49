"""SumpWatch gateway: ingest -> validate -> store -> rules -> alerts -> api."""

__version__ = "0.1.0"
