-- Migration 3: escalation follows the violation, not the alert episode (issue 15.7).
-- An alert records when its violation's clock started (the first episode of the rule
-- at the site in the season year), so the next episode continues that clock.
-- Existing alerts keep NULL: their clock is read as their escalate_at's start, i.e.
-- opened_at (alerts.outbox.episode_starts).
ALTER TABLE alerts ADD COLUMN clock_started_at TEXT;
