"""Which state database to open: PostgreSQL for a ``postgresql://`` URL (the
``state_url`` setting), else the SQLite file (the embedded default).

Takes the two values rather than ``Settings``: the state package reads no settings
(tests/test_state_layering.py); the composition root and ``sumpwatch db`` pass them.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from gateway.state.database import Database, SqliteDatabase


def state_database(sqlite_file: Path, url: SecretStr | str | None = None) -> Database:
    """The (unopened) state database: PostgreSQL at ``url``, else ``sqlite_file``."""
    if isinstance(url, SecretStr):
        url = url.get_secret_value()
    if url is not None:
        # Imported here: psycopg is ~9 MB of a gateway's memory, and an SQLite state
        # never needs it (issue 17 item 2).
        from gateway.state.postgres import PostgresDatabase

        return PostgresDatabase(url)
    return SqliteDatabase(sqlite_file)
