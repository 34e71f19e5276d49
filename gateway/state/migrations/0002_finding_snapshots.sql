-- Migration 2: frozen evidence (issue 15.5). A snapshot of what a finding looked
-- like when it opened and at each level change: the finding, its evidence, the
-- readings window, sensor health, the rule pack version and citations, as canonical
-- JSON with its SHA-256. Rows are written once: the triggers refuse UPDATE and
-- DELETE, so a report for a past month reads the same next year.
CREATE TABLE IF NOT EXISTS finding_snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    finding_id TEXT NOT NULL,
    change TEXT NOT NULL,
    at TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL,
    content TEXT NOT NULL,
    sha256 TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS finding_snapshots_finding ON finding_snapshots (finding_id, seq);
CREATE TRIGGER IF NOT EXISTS finding_snapshots_frozen_update
BEFORE UPDATE ON finding_snapshots
BEGIN
    SELECT RAISE(ABORT, 'finding snapshots are frozen');
END;
CREATE TRIGGER IF NOT EXISTS finding_snapshots_frozen_delete
BEFORE DELETE ON finding_snapshots
BEGIN
    SELECT RAISE(ABORT, 'finding snapshots are frozen');
END;
