-- The schema a gateway created before migrations existed (main at 4b01b62),
-- as SQLite stored it (sqlite_master). Used to test the upgrade of such a database.
CREATE TABLE readings (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    boot TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    received_at REAL NOT NULL,
    battery_v REAL,
    rssi_dbm REAL,
    level_cm REAL, pump_on REAL, water_temp_c REAL, backup_pump_on REAL, pump_current_a REAL, flow_lpm REAL, pressure_kpa REAL, pipe_temp_c REAL, air_temp_c REAL,
    PRIMARY KEY (site_id, node_id, boot, seq)
) WITHOUT ROWID;
CREATE INDEX readings_site_node_ts ON readings (site_id, node_id, ts);
CREATE TABLE rollup_1m (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    kind TEXT NOT NULL,
    samples REAL, pump_cycles REAL, pump_on_s REAL, backup_pump_cycles REAL, backup_pump_on_s REAL, pumped_volume_l REAL, level_cm_count REAL, level_cm_min REAL, level_cm_max REAL, level_cm_mean REAL, level_cm_last REAL, pump_on_count REAL, pump_on_min REAL, pump_on_max REAL, pump_on_mean REAL, pump_on_last REAL, water_temp_c_count REAL, water_temp_c_min REAL, water_temp_c_max REAL, water_temp_c_mean REAL, water_temp_c_last REAL, backup_pump_on_count REAL, backup_pump_on_min REAL, backup_pump_on_max REAL, backup_pump_on_mean REAL, backup_pump_on_last REAL, pump_current_a_count REAL, pump_current_a_min REAL, pump_current_a_max REAL, pump_current_a_mean REAL, pump_current_a_last REAL, flow_lpm_count REAL, flow_lpm_min REAL, flow_lpm_max REAL, flow_lpm_mean REAL, flow_lpm_last REAL, pressure_kpa_count REAL, pressure_kpa_min REAL, pressure_kpa_max REAL, pressure_kpa_mean REAL, pressure_kpa_last REAL, pipe_temp_c_count REAL, pipe_temp_c_min REAL, pipe_temp_c_max REAL, pipe_temp_c_mean REAL, pipe_temp_c_last REAL, air_temp_c_count REAL, air_temp_c_min REAL, air_temp_c_max REAL, air_temp_c_mean REAL, air_temp_c_last REAL,
    PRIMARY KEY (site_id, node_id, bucket)
) WITHOUT ROWID;
CREATE INDEX rollup_1m_site_bucket ON rollup_1m (site_id, bucket);
CREATE TABLE rollup_1h (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    kind TEXT NOT NULL,
    samples REAL, pump_cycles REAL, pump_on_s REAL, backup_pump_cycles REAL, backup_pump_on_s REAL, pumped_volume_l REAL, level_cm_count REAL, level_cm_min REAL, level_cm_max REAL, level_cm_mean REAL, level_cm_last REAL, pump_on_count REAL, pump_on_min REAL, pump_on_max REAL, pump_on_mean REAL, pump_on_last REAL, water_temp_c_count REAL, water_temp_c_min REAL, water_temp_c_max REAL, water_temp_c_mean REAL, water_temp_c_last REAL, backup_pump_on_count REAL, backup_pump_on_min REAL, backup_pump_on_max REAL, backup_pump_on_mean REAL, backup_pump_on_last REAL, pump_current_a_count REAL, pump_current_a_min REAL, pump_current_a_max REAL, pump_current_a_mean REAL, pump_current_a_last REAL, flow_lpm_count REAL, flow_lpm_min REAL, flow_lpm_max REAL, flow_lpm_mean REAL, flow_lpm_last REAL, pressure_kpa_count REAL, pressure_kpa_min REAL, pressure_kpa_max REAL, pressure_kpa_mean REAL, pressure_kpa_last REAL, pipe_temp_c_count REAL, pipe_temp_c_min REAL, pipe_temp_c_max REAL, pipe_temp_c_mean REAL, pipe_temp_c_last REAL, air_temp_c_count REAL, air_temp_c_min REAL, air_temp_c_max REAL, air_temp_c_mean REAL, air_temp_c_last REAL,
    PRIMARY KEY (site_id, node_id, bucket)
) WITHOUT ROWID;
CREATE INDEX rollup_1h_site_bucket ON rollup_1h (site_id, bucket);
CREATE TABLE rollup_dirty (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    minute INTEGER NOT NULL,
    gen INTEGER NOT NULL,
    PRIMARY KEY (site_id, node_id, minute)
) WITHOUT ROWID;
CREATE INDEX rollup_dirty_minute ON rollup_dirty (minute);
CREATE TABLE deadletters (
    id INTEGER PRIMARY KEY,
    received_at REAL NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX deadletters_reason ON deadletters (reason, received_at);
CREATE TABLE node_status (
    site_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    online INTEGER NOT NULL,
    changed_at REAL NOT NULL,
    PRIMARY KEY (site_id, node_id)
);
CREATE TABLE findings (
    id TEXT PRIMARY KEY,
    rule_id TEXT NOT NULL,
    site_id TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    cleared_at TEXT,
    audience TEXT NOT NULL,
    evidence TEXT NOT NULL,
    citations TEXT NOT NULL,
    action TEXT NOT NULL
);
CREATE INDEX findings_site_opened ON findings (site_id, opened_at);
CREATE INDEX findings_opened ON findings (opened_at);
CREATE INDEX findings_open ON findings (cleared_at) WHERE cleared_at IS NULL;
CREATE TABLE finding_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    finding_id TEXT NOT NULL,
    change TEXT NOT NULL,
    at TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT ''
);
CREATE INDEX finding_events_finding ON finding_events (finding_id, seq)
;
CREATE TABLE alerts (
    id TEXT PRIMARY KEY,
    site_id TEXT NOT NULL,
    jurisdiction TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    finding_id TEXT NOT NULL,
    state TEXT NOT NULL,
    severity TEXT NOT NULL,
    level TEXT NOT NULL DEFAULT '',
    notified_severity TEXT NOT NULL,
    notified_level TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL,
    action TEXT NOT NULL DEFAULT '',
    audience TEXT NOT NULL,
    citations TEXT NOT NULL,
    evidence TEXT NOT NULL,
    opened_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    finding_cleared_at TEXT,
    acknowledged_at TEXT,
    acknowledged_by TEXT,
    ack_note TEXT,
    resolved_at TEXT,
    resolved_by TEXT,
    resolve_note TEXT,
    assignee TEXT,
    escalate_at TEXT,
    escalated_at TEXT,
    next_repeat_at TEXT,
    repeats INTEGER NOT NULL DEFAULT 0,
    flaps INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX alerts_site_rule ON alerts (site_id, rule_id, opened_at);
CREATE INDEX alerts_finding ON alerts (finding_id);
CREATE INDEX alerts_state ON alerts (state);
CREATE TABLE notifications (
    id TEXT PRIMARY KEY,
    alert_id TEXT NOT NULL REFERENCES alerts (id),
    site_id TEXT NOT NULL,
    audience TEXT NOT NULL,
    channel TEXT NOT NULL,
    recipient TEXT NOT NULL,
    recipient_name TEXT NOT NULL DEFAULT '',
    units TEXT NOT NULL DEFAULT 'us',
    reason TEXT NOT NULL,
    severity TEXT NOT NULL,
    created_at TEXT NOT NULL,
    not_before TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    sent_at TEXT,
    cancelled_at TEXT,
    last_error TEXT
);
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
CREATE INDEX notifications_alert ON notifications (alert_id);
CREATE TABLE delivery_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT NOT NULL REFERENCES notifications (id),
    attempt INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    ok INTEGER,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX delivery_attempts_notification ON delivery_attempts (notification_id);
CREATE TABLE users (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    username TEXT NOT NULL UNIQUE COLLATE NOCASE,
    display_name TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    site_ids TEXT NOT NULL DEFAULT '[]',
    jurisdictions TEXT NOT NULL DEFAULT '[]',
    disabled INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX sessions_expiry ON sessions (expires_at);
CREATE TABLE api_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    last_used_at REAL,
    revoked INTEGER NOT NULL DEFAULT 0
);
