"""State: the database handle (SQLite, or PostgreSQL with ``state_url``), its numbered
migrations and the repositories of the kernel's aggregates (dead letters and node
status, findings).

"Store" means the time-series store only (:mod:`gateway.store`). Repositories of a
stage's own aggregate (the alert outbox in :mod:`alerts.outbox`, accounts in
:mod:`gateway.accounts.repository`) live beside their models and reach the database only
through :class:`Database`; their tables, like every table, come from
:mod:`gateway.state.migrations`.
"""

from gateway.state.database import Database, SqliteDatabase

__all__ = ["Database", "SqliteDatabase"]
