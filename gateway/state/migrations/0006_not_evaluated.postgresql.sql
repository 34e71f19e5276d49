-- Migration 6 on PostgreSQL (see 0006_not_evaluated.sql): spans not judged.
CREATE TABLE IF NOT EXISTS not_evaluated (
    id TEXT COLLATE "C" PRIMARY KEY,
    site_id TEXT COLLATE "C" NOT NULL,
    node_id TEXT COLLATE "C" NOT NULL,
    start_ts TEXT COLLATE "C" NOT NULL,
    end_ts TEXT COLLATE "C" NOT NULL,
    count INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS not_evaluated_site ON not_evaluated (site_id, start_ts);
