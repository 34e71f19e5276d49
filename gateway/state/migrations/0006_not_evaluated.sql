-- Migration 6: spans of readings that were stored but not judged (issue 20.10).
-- A reading older than its node's newest cannot be fed to the stateful detectors;
-- each such run of late readings is one row, updated in place while it grows, so
-- the dashboard chart shades it and the site report lists it.
CREATE TABLE IF NOT EXISTS not_evaluated (
    id TEXT PRIMARY KEY,
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    start_ts TEXT NOT NULL,
    end_ts TEXT NOT NULL,
    count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS not_evaluated_site ON not_evaluated (site_id, start_ts);
