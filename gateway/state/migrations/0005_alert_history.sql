-- Migration 5: an alert's history (issue 20.4). Every step a person or the system
-- takes on an alert (opened, acknowledged, assigned, resolved with who and why,
-- cleared, re-opened, escalated) is one row, so a resolve that did not fix the
-- condition stays on record after the alert re-opens.
CREATE TABLE IF NOT EXISTS alert_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    alert_id TEXT NOT NULL REFERENCES alerts (id),
    at TEXT NOT NULL,
    step TEXT NOT NULL,
    actor TEXT,
    note TEXT,
    condition_persisted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS alert_history_alert ON alert_history (alert_id, id);
