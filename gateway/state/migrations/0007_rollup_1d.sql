-- Migration 7: daily per-node aggregates for whole-season reports (issue 17 item 5).
-- A season report read ~11,000 wide 1-hour rows a site; it now reads one row per node
-- and UTC day. Each row keeps, for the day's 24 hours, the few hourly values a report
-- adds up (samples, pump cycles and run time, outlet volume, pipe and air extremes), as
-- 24 little-endian float64 (NaN: no value), so the report's arithmetic and its numbers
-- stay exactly those of the hourly rollups while the read is ~25x smaller.
-- Owned by the time-series store (gateway/store/sqlite.py); the InfluxDB store derives
-- the same rows from its 1-hour rollups on read.
CREATE TABLE IF NOT EXISTS rollup_1d (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    day INTEGER NOT NULL,
    kind TEXT NOT NULL,
    samples_h BLOB NOT NULL,
    pump_cycles_h BLOB,
    pump_on_s_h BLOB,
    backup_pump_cycles_h BLOB,
    pumped_volume_l_h BLOB,
    pipe_temp_c_min_h BLOB,
    air_temp_c_min_h BLOB,
    air_temp_c_max_h BLOB,
    PRIMARY KEY (site_id, node_id, day)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rollup_1d_site_day ON rollup_1d (site_id, day);
-- Days whose 1-hour rollups changed since their daily row was computed. The rollup job
-- (and a report, before it reads a site) recomputes them; each mark is one UTC day.
CREATE TABLE IF NOT EXISTS rollup_1d_dirty (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    day INTEGER NOT NULL,
    PRIMARY KEY (site_id, node_id, day)
) WITHOUT ROWID;
-- Every day an existing database already holds hourly rollups for is due once.
INSERT OR IGNORE INTO rollup_1d_dirty (site_id, node_id, day)
SELECT DISTINCT site_id, node_id, CAST(bucket / 86400 AS INTEGER) * 86400 FROM rollup_1h;
