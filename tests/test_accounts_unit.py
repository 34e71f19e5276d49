"""Accounts without HTTP: password hashing, sessions, tokens, scope, rate limits,
log redaction and the ``sumpwatch user`` commands (real SQLite in a temp dir)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gateway.accounts.cli import user_app
from gateway.accounts.models import Principal, Role, Scope
from gateway.accounts.ratelimit import FailureLimiter, LoginLimiter
from gateway.accounts.repository import AccountStore
from gateway.accounts.security import RedactSecretsFilter, redact
from gateway.errors import ConfigError
from gateway.registry import load_registry
from gateway.settings import REPO_DIR
from gateway.state.database import Connection, Database

REGISTRY = load_registry(REPO_DIR / "deploy" / "sites.example.toml")


@pytest.fixture
async def store(state_db: Database) -> AccountStore:
    """Accounts on SQLite and on PostgreSQL (each test runs on both)."""
    accounts = AccountStore(state_db, "unit-test-key", session_ttl_s=60)
    await accounts.open()
    return accounts


def _every_row(conn: Connection) -> list[str]:
    """Every row of every table, as text: what a copy of the database holds."""
    if isinstance(conn, sqlite3.Connection):
        return list(conn.iterdump())
    tables = conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    ).fetchall()
    return [str(tuple(r)) for (t,) in tables for r in conn.execute(f"SELECT * FROM {t}")]


async def test_passwords_are_stored_as_argon2id_hashes(store: AccountStore) -> None:
    await store.add_user("ann", "correct horse battery", Role.ADMIN)
    stored = await store.db.read(
        lambda c: c.execute("SELECT password_hash FROM users WHERE username = 'ann'").fetchone()[0]
    )
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert await store.authenticate("ann", "correct horse battery") is not None
    assert await store.authenticate("ANN", "correct horse battery") is not None  # name: any case
    assert await store.authenticate("ann", "wrong horse battery") is None
    assert await store.authenticate("nobody", "correct horse battery") is None


async def test_short_passwords_and_scopeless_accounts_are_refused(store: AccountStore) -> None:
    with pytest.raises(ConfigError, match="at least"):
        await store.add_user("bob", "short", Role.ADMIN)
    with pytest.raises(ConfigError, match="site"):
        await store.add_user("bob", "long enough password", Role.HOMEOWNER)
    with pytest.raises(ConfigError, match="jurisdiction"):
        await store.add_user("bob", "long enough password", Role.PUBLIC_WORKS)


async def test_a_session_ends_at_logout_and_when_it_expires(store: AccountStore) -> None:
    user = await store.add_user("cat", "long enough password", Role.HOMEOWNER, site_ids=["elm-12"])
    secret, info = await store.create_session(user)
    assert (await store.session(secret)) is not None
    assert info.csrf_token and info.csrf_token != secret
    await store.end_session(secret)
    assert await store.session(secret) is None
    secret, _ = await store.create_session(user)
    await store.db.write(lambda c: c.execute("UPDATE sessions SET expires_at = 0"))
    assert await store.session(secret) is None


async def test_only_a_digest_of_session_ids_and_tokens_is_stored(store: AccountStore) -> None:
    user = await store.add_user("dan", "long enough password", Role.ADMIN)
    session, _ = await store.create_session(user)
    token, _ = await store.create_token(user, "ci")
    dump = "\n".join(await store.db.read(_every_row))
    assert session not in dump
    assert token not in dump


async def test_a_password_change_ends_the_users_sessions(store: AccountStore) -> None:
    user = await store.add_user("eve", "long enough password", Role.ADMIN)
    secret, _ = await store.create_session(user)
    await store.set_password("eve", "another long password")
    assert await store.session(secret) is None
    assert await store.authenticate("eve", "another long password") is not None


def test_each_role_sees_its_own_scope() -> None:
    homeowner = Principal("h", Role.HOMEOWNER, site_ids=frozenset({"elm-16"}))
    staff = Principal("p", Role.PUBLIC_WORKS, jurisdictions=frozenset({"edgar"}))
    admin = Principal("a", Role.ADMIN)
    assert [s.id for s in Scope(homeowner, REGISTRY).sites()] == ["elm-16"]
    assert {s.jurisdiction for s in Scope(staff, REGISTRY).sites()} == {"edgar"}
    assert len(Scope(admin, REGISTRY).sites()) == len(REGISTRY)
    assert Scope(admin, REGISTRY).site_ids() is None
    assert not Scope(staff, REGISTRY).allows("main-101")
    assert not Scope(homeowner, REGISTRY).allows("no-such-site")
    assert homeowner.can_see_jurisdiction("edgar") is False
    assert staff.can_see_jurisdiction("edgar") and not staff.can_see_jurisdiction("sewer-ord-247")


def test_the_limiter_blocks_after_max_failures_until_the_window_slides() -> None:
    now = [1000.0]
    limiter = FailureLimiter(max_failures=3, window_s=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("k") is None
        limiter.fail("k")
        now[0] += 1
    assert limiter.retry_after("k") == 57  # now 1003; the first failure leaves at 1060
    now[0] = 1060.5
    assert limiter.retry_after("k") is None
    limiter.fail("k")
    limiter.reset("k")
    assert limiter.retry_after("k") is None


def test_login_limits_count_per_address_and_per_username() -> None:
    now = [0.0]
    limiter = LoginLimiter(per_user=2, per_address=3, window_s=100, clock=lambda: now[0])
    limiter.failed("10.0.0.1", "Ann")
    limiter.failed("10.0.0.2", "ann")
    assert limiter.retry_after("10.0.0.3", "ANN") is not None  # names are case-insensitive
    assert limiter.retry_after("10.0.0.3", "bob") is None
    limiter.failed("10.0.0.9", "u1")
    limiter.failed("10.0.0.9", "u2")
    limiter.failed("10.0.0.9", "u3")
    assert limiter.retry_after("10.0.0.9", "someone-new") is not None  # a spraying address


def test_secrets_are_masked_in_log_messages() -> None:
    text = redact(
        "auth=Authorization: Bearer swt_abcdefghijklmnop cookie sumpwatch_session=s3cr3t; x "
        'password="hunter22" token swt_ZZZZZZZZZZZZ'
    )
    for secret in ("swt_abcdefghijklmnop", "s3cr3t", "hunter22", "swt_ZZZZZZZZZZZZ"):
        assert secret not in text
    record = logging.LogRecord("x", logging.INFO, "f", 1, "token %s", ("swt_abcdefghijk",), None)
    RedactSecretsFilter().filter(record)
    assert record.getMessage() == "token swt_[REDACTED]"


def test_the_user_command_adds_lists_and_issues_tokens(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SUMPWATCH_DATA_DIR": str(tmp_path), "SUMPWATCH_API__SECRET_KEY": "cli-test-key"}
    added = runner.invoke(
        user_app,
        ["add", "owner16", "--role", "homeowner", "--site", "elm-16", "--password-stdin"],
        input="a long enough password\n",
        env=env,
    )
    assert added.exit_code == 0, added.output
    unknown = runner.invoke(
        user_app,
        ["add", "x", "--role", "homeowner", "--site", "nowhere", "--password-stdin"],
        input="a long enough password\n",
        env=env,
    )
    assert unknown.exit_code == 1
    listed = runner.invoke(user_app, ["list"], env=env)
    assert "owner16" in listed.output and "elm-16" in listed.output
    token = runner.invoke(user_app, ["token", "owner16", "--name", "ha"], env=env)
    assert token.exit_code == 0
    assert token.stdout.strip().startswith("swt_")


async def test_the_demo_users_file_seeds_once_and_describes_its_accounts(
    store: AccountStore,
) -> None:
    from gateway.accounts.seed import describe_seed, load_seed, seed_users

    users = load_seed(REPO_DIR / "deploy" / "users.example.toml")
    created = await seed_users(store, users)
    assert {u.role for u in created} == {Role.HOMEOWNER, Role.PUBLIC_WORKS, Role.ADMIN}
    assert await seed_users(store, users) == []  # existing accounts are left alone
    for user in users:
        assert await store.authenticate(user.username, user.password) is not None
        assert all(s in REGISTRY for s in user.sites)
    lines = describe_seed(users)
    assert any("elm16" in line and "elm-16" in line for line in lines)
