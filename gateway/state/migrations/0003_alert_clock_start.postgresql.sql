-- Migration 3 on PostgreSQL (see 0003_alert_clock_start.sql).
ALTER TABLE alerts ADD COLUMN clock_started_at TEXT COLLATE "C";
