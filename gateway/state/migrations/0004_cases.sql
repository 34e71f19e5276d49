-- Migration 4: enforcement cases (issue 16, docs/enforcement.md). A case per site and
-- problem, its dated steps (who, when, how served, documents with their SHA-256) and
-- the ledger. Steps and ledger lines are append-only: the triggers refuse UPDATE and
-- DELETE, so a correction is a new row.
CREATE TABLE IF NOT EXISTS cases (
        id TEXT PRIMARY KEY,
        site_id TEXT NOT NULL,
        jurisdiction TEXT NOT NULL,
        rule_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        title TEXT NOT NULL,
        opened_at TEXT NOT NULL
    );
CREATE INDEX IF NOT EXISTS cases_site_rule ON cases (site_id, rule_id, opened_at);
CREATE INDEX IF NOT EXISTS cases_jurisdiction ON cases (jurisdiction, opened_at);
CREATE TABLE IF NOT EXISTS case_steps (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        case_id TEXT NOT NULL REFERENCES cases (id),
        kind TEXT NOT NULL,
        at TEXT NOT NULL,
        recorded_at TEXT NOT NULL,
        actor TEXT NOT NULL,
        actor_role TEXT NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        finding_id TEXT,
        body TEXT NOT NULL
    );
CREATE INDEX IF NOT EXISTS case_steps_case ON case_steps (case_id, seq);
CREATE INDEX IF NOT EXISTS case_steps_finding ON case_steps (finding_id);
CREATE TRIGGER IF NOT EXISTS case_steps_no_update BEFORE UPDATE ON case_steps
        BEGIN SELECT RAISE(ABORT, 'case steps are append-only'); END;
CREATE TRIGGER IF NOT EXISTS case_steps_no_delete BEFORE DELETE ON case_steps
        BEGIN SELECT RAISE(ABORT, 'case steps are append-only'); END;
CREATE TABLE IF NOT EXISTS case_documents (
        id TEXT PRIMARY KEY,
        case_id TEXT NOT NULL REFERENCES cases (id),
        name TEXT NOT NULL,
        content_type TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size INTEGER NOT NULL,
        data BLOB NOT NULL,
        uploaded_at TEXT NOT NULL
    );
CREATE TABLE IF NOT EXISTS case_ledger (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        site_id TEXT NOT NULL,
        case_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        period TEXT NOT NULL,
        amount_cents INTEGER,
        max_cents INTEGER,
        basis TEXT NOT NULL,
        citation TEXT NOT NULL,
        posted_at TEXT NOT NULL,
        corrects INTEGER REFERENCES case_ledger (seq),
        referral INTEGER NOT NULL DEFAULT 0,
        note TEXT NOT NULL DEFAULT ''
    );
CREATE INDEX IF NOT EXISTS case_ledger_site ON case_ledger (site_id, seq);
CREATE TRIGGER IF NOT EXISTS case_ledger_no_update BEFORE UPDATE ON case_ledger
        BEGIN SELECT RAISE(ABORT, 'ledger lines are immutable; post a correction'); END;
CREATE TRIGGER IF NOT EXISTS case_ledger_no_delete BEFORE DELETE ON case_ledger
        BEGIN SELECT RAISE(ABORT, 'ledger lines are immutable; post a correction'); END;
