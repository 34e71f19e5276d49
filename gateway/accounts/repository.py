"""Users, sessions and API tokens in the state database (SQLite or PostgreSQL).

* Passwords are hashed with Argon2id (argon2-cffi's current defaults) and
  re-hashed on login when those defaults change.
* Session ids and API tokens are 256-bit random secrets; only their HMAC-SHA256
  (keyed with ``settings.api.secret_key``) is stored, so a copy of the database
  cannot be replayed as a login and a changed key logs everyone out.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from gateway.accounts.models import ApiToken, Role, User
from gateway.errors import ConfigError, NotFound
from gateway.state.database import INTEGRITY_ERRORS, Connection, Database, Row

#: API tokens start with this, so a leaked one is easy to recognise (and redact in logs).
TOKEN_PREFIX = "swt_"
MIN_PASSWORD_LENGTH = 10
#: A session lives this long after its last renewal (sliding).
SESSION_TTL_S = 12 * 3600.0


def check_password_policy(password: str) -> None:
    """Refuse passwords too short to resist guessing (ConfigError)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ConfigError(f"passwords need at least {MIN_PASSWORD_LENGTH} characters")


def _epoch(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _user(row: Row) -> User:
    return User(
        id=row["id"],
        username=row["username"],
        role=Role(row["role"]),
        display_name=row["display_name"],
        site_ids=tuple(json.loads(row["site_ids"])),
        jurisdictions=tuple(json.loads(row["jurisdictions"])),
        disabled=bool(row["disabled"]),
        created_at=_epoch(row["created_at"]),
    )


def _token(row: Row) -> ApiToken:
    return ApiToken(
        id=row["id"],
        user_id=row["user_id"],
        name=row["name"],
        prefix=row["prefix"],
        created_at=_epoch(row["created_at"]) or datetime.now(UTC),
        last_used_at=_epoch(row["last_used_at"]),
        revoked=bool(row["revoked"]),
    )


def check_scope(role: Role, site_ids: Iterable[str], jurisdictions: Iterable[str]) -> None:
    """A homeowner needs sites, public works needs jurisdictions; raise ConfigError if not."""
    if role is Role.HOMEOWNER and not list(site_ids):
        raise ConfigError("a homeowner account needs at least one site")
    if role is Role.PUBLIC_WORKS and not list(jurisdictions):
        raise ConfigError("a public-works account needs at least one jurisdiction")


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A live session: its user and the CSRF token bound to it."""

    user: User
    csrf_token: str
    expires_at: float


class AccountStore:
    """The accounts repository (tables ``users``, ``sessions``, ``api_tokens``)."""

    def __init__(
        self,
        db: Database,
        secret_key: str,
        *,
        session_ttl_s: float = SESSION_TTL_S,
        hasher: PasswordHasher | None = None,
    ) -> None:
        self.db = db
        self._key = secret_key.encode()
        self.session_ttl_s = session_ttl_s
        # argon2-cffi's defaults (Argon2id, RFC 9106 low-memory profile) unless given.
        self.hasher = hasher or PasswordHasher()
        # Verified when a username is unknown, so a failed login takes as long either way.
        self._dummy_hash = self.hasher.hash(secrets.token_urlsafe(16))

    async def hash_password(self, password: str) -> str:
        """An Argon2id hash of a password (refuses short ones).

        Hashing takes a deliberate ~0.1-0.5 s of CPU: it runs in a worker thread so
        ingestion and live pages keep going meanwhile.
        """
        check_password_policy(password)
        return await asyncio.to_thread(self.hasher.hash, password)

    async def _verify(self, stored_hash: str, password: str) -> bool:
        def run() -> bool:
            try:
                return self.hasher.verify(stored_hash, password)
            except (VerificationError, InvalidHashError):
                return False

        return await asyncio.to_thread(run)

    async def open(self) -> None:
        """Make sure the schema is current (the tables come from the migrations)."""
        await self.db.migrate()

    def _digest(self, secret: str) -> str:
        return hmac.new(self._key, secret.encode(), hashlib.sha256).hexdigest()

    # ------------------------------------------------------------------ users

    async def add_user(
        self,
        username: str,
        password: str,
        role: Role,
        *,
        site_ids: Iterable[str] = (),
        jurisdictions: Iterable[str] = (),
        display_name: str = "",
    ) -> User:
        """Create an account; ConfigError if the name is taken or the scope is missing."""
        sites, juris = list(site_ids), list(jurisdictions)
        check_scope(role, sites, juris)
        password_hash = await self.hash_password(password)

        def run(conn: Connection) -> User:
            try:
                row = conn.execute(
                    "INSERT INTO users (username, display_name, role, password_hash, site_ids,"
                    " jurisdictions, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *",
                    (
                        username,
                        display_name,
                        role.value,
                        password_hash,
                        json.dumps(sites),
                        json.dumps(juris),
                        time.time(),
                    ),
                ).fetchone()
            except INTEGRITY_ERRORS as exc:
                raise ConfigError(f"user {username!r} already exists") from exc
            return _user(row)

        return await self.db.write(run)

    async def get_user(self, username: str) -> User | None:
        """A user by name (case-insensitive), or None."""

        def run(conn: Connection) -> User | None:
            row = conn.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
            return None if row is None else _user(row)

        return await self.db.read(run)

    async def users(self) -> list[User]:
        """Every account, by name."""

        def run(conn: Connection) -> list[User]:
            return [_user(r) for r in conn.execute("SELECT * FROM users ORDER BY username")]

        return await self.db.read(run)

    async def set_password(self, username: str, password: str) -> None:
        """Replace a password and end the user's sessions."""
        password_hash = await self.hash_password(password)

        def run(conn: Connection) -> None:
            cur = conn.execute(
                "UPDATE users SET password_hash = ? WHERE username = ?", (password_hash, username)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no user {username!r}")
            conn.execute(
                "DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE username = ?)",
                (username,),
            )

        await self.db.write(run)

    async def authenticate(self, username: str, password: str) -> User | None:
        """The user if the password is right and the account enabled, else None."""

        def load(conn: Connection) -> tuple[User, str] | None:
            row = conn.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
            return None if row is None else (_user(row), row["password_hash"])

        found = await self.db.read(load)
        if found is None:
            await self._verify(self._dummy_hash, password)
            return None
        user, stored = found
        if not await self._verify(stored, password) or user.disabled:
            return None
        if self.hasher.check_needs_rehash(stored):
            new_hash = await asyncio.to_thread(self.hasher.hash, password)
            await self.db.write(
                lambda conn: conn.execute(
                    "UPDATE users SET password_hash = ? WHERE id = ?", (new_hash, user.id)
                )
            )
        return user

    # ------------------------------------------------------------------ sessions

    async def create_session(self, user: User) -> tuple[str, SessionInfo]:
        """A new session: the secret for the cookie, and its info (with the CSRF token)."""
        secret = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = time.time()
        expires = now + self.session_ttl_s

        def run(conn: Connection) -> None:
            conn.execute("DELETE FROM sessions WHERE expires_at < ?", (now,))
            conn.execute(
                "INSERT INTO sessions (id_hash, user_id, csrf_token, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (self._digest(secret), user.id, csrf, now, expires),
            )

        await self.db.write(run)
        return secret, SessionInfo(user, csrf, expires)

    async def session(self, secret: str) -> SessionInfo | None:
        """The live session of a cookie secret (renewed when half used), or None."""
        digest = self._digest(secret)
        now = time.time()

        def run(conn: Connection) -> tuple[SessionInfo, bool] | None:
            row = conn.execute(
                "SELECT s.csrf_token, s.expires_at, u.* FROM sessions s"
                " JOIN users u ON u.id = s.user_id WHERE s.id_hash = ?",
                (digest,),
            ).fetchone()
            if row is None or row["expires_at"] < now or row["disabled"]:
                return None
            renew = row["expires_at"] - now < self.session_ttl_s / 2
            return SessionInfo(_user(row), row["csrf_token"], row["expires_at"]), renew

        found = await self.db.read(run)
        if found is None:
            return None
        info, renew = found
        if renew:
            expires = now + self.session_ttl_s
            await self.db.write(
                lambda conn: conn.execute(
                    "UPDATE sessions SET expires_at = ? WHERE id_hash = ?", (expires, digest)
                )
            )
            info = SessionInfo(info.user, info.csrf_token, expires)
        return info

    async def end_session(self, secret: str) -> None:
        """Log out: forget the session."""
        digest = self._digest(secret)
        await self.db.write(
            lambda conn: conn.execute("DELETE FROM sessions WHERE id_hash = ?", (digest,))
        )

    # ------------------------------------------------------------------ API tokens

    async def create_token(self, user: User, name: str) -> tuple[str, ApiToken]:
        """A new API token for a user: the secret (shown once) and its metadata."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        prefix = secret[: len(TOKEN_PREFIX) + 6]

        def run(conn: Connection) -> ApiToken:
            row = conn.execute(
                "INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at)"
                " VALUES (?, ?, ?, ?, ?) RETURNING *",
                (user.id, name, prefix, self._digest(secret), time.time()),
            ).fetchone()
            return _token(row)

        return secret, await self.db.write(run)

    async def token_user(self, secret: str) -> User | None:
        """The user of a live API token (and note its use), or None."""
        digest = self._digest(secret)

        def run(conn: Connection) -> User | None:
            row = conn.execute(
                "SELECT u.*, t.id AS token_id FROM api_tokens t JOIN users u ON u.id = t.user_id"
                " WHERE t.token_hash = ? AND t.revoked = 0",
                (digest,),
            ).fetchone()
            if row is None or row["disabled"]:
                return None
            conn.execute(
                "UPDATE api_tokens SET last_used_at = ? WHERE id = ?",
                (time.time(), row["token_id"]),
            )
            return _user(row)

        return await self.db.write(run)

    async def tokens(self, user: User) -> list[ApiToken]:
        """A user's tokens, newest first."""

        def run(conn: Connection) -> list[ApiToken]:
            rows = conn.execute(
                "SELECT * FROM api_tokens WHERE user_id = ? ORDER BY id DESC", (user.id,)
            )
            return [_token(r) for r in rows]

        return await self.db.read(run)

    async def revoke_token(self, user: User, token_id: int) -> None:
        """Revoke one of the user's tokens (NotFound if it is not theirs)."""

        def run(conn: Connection) -> None:
            cur = conn.execute(
                "UPDATE api_tokens SET revoked = 1 WHERE id = ? AND user_id = ?",
                (token_id, user.id),
            )
            if cur.rowcount == 0:
                raise NotFound(f"no token {token_id}")

        await self.db.write(run)
