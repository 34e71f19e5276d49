"""Detector thresholds, in one place, each with the physical reason for its value.

These are engineering margins, not ordinance numbers (those live in the packs with
their citations). They are chosen from the physics of a residential sump (an
18 in / 46 cm basin, a 1/3 hp pump moving ~100-200 L/min, 1-1.5 in line) and must
hold for sensor noise of about +-0.5 cm level, +-1 L/min flow, +-1 kPa pressure and
sample intervals of 5-30 s. ``docs/detectors.md`` lists them with their meaning.
"""

from __future__ import annotations

from datetime import timedelta

# --- outlet flow and pressure -------------------------------------------------
#: A pump moving water through the line gives tens of L/min at the outlet; below
#: this the outlet is "dry" (noise floor of a paddle or ultrasonic flow meter).
FLOW_ABSENT_LPM = 3.0
#: At or above this the outlet is clearly flowing.
FLOW_PRESENT_LPM = 8.0
#: A line open to the air reads ~0 kPa; a pump dead-heading against ice reads its
#: shut-off head minus the rise to the node (a 1/3 hp pump: 60+ kPa at the pump).
#: 15 kPa separates "no water in the line" from "pump pushing against a blockage".
PRESSURE_BLOCKED_KPA = 15.0

#: After a start the pump first refills the line (it partly drains between cycles):
#: outlet samples earlier than max(MIN_LINE_FILL, line volume / pump flow) after the
#: start say nothing about where the water goes. The pump flow is the cycle's own
#: (pit volume / run time), never taken below MIN_PUMP_FLOW_LPM.
MIN_LINE_FILL = timedelta(seconds=2)
MIN_PUMP_FLOW_LPM = 30.0
#: No residential sump pump drains a pit faster than this (a 1/2 hp pump at low head):
#: used to bound when a run started and stopped from the levels at its samples.
MAX_PUMP_LPM = 300.0
#: The fastest a pump drains its pit, as a multiple of its learned rate (a hose to a
#: floor drain faces less head than the line).
SURE_RATE_FACTOR = 1.5
#: Level-noise sigmas (of a difference of two readings) taken off a fall before it
#: bounds how long the pump surely ran: one reading in ~40 lies further off.
SURE_NOISE_SIGMAS = 2.0
#: Safety margin inside that bounded run, s (level noise, clock jitter).
SURE_MARGIN_S = 2.0

# --- pump cycles ----------------------------------------------------------------
#: A cycle that moved less than this (≈ 4 cm in an 18 in basin) is not evidence of
#: pumping (float chatter, noise) and is not judged by the sanitary detector.
MIN_CYCLE_VOLUME_L = 6.0
#: Outlet volume / pit volume below this: the outlet does not account for the
#: water; above ACCOUNTED the cycle is normal. In between: inconclusive.
UNACCOUNTED_RATIO = 0.3
ACCOUNTED_RATIO = 0.6
#: Consecutive judged cycles needed to open / clear the sanitary finding (the
#: product target is detection within 3 pump cycles).
SANITARY_CYCLES_TO_OPEN = 2
SANITARY_CYCLES_TO_CLEAR = 2
#: When no outlet sample surely falls inside a run (sparse sampling), each dry
#: sample adds -log10(1 - p) of evidence, p being its chance of catching a healthy
#: line flowing (capped at P_CATCH_MAX); a flowing sample resets it. At
#: SANITARY_EVIDENCE_TO_OPEN a healthy line would have had < 1e-4 chance of looking
#: this dry. A cycle judged on sure samples counts 1.
P_CATCH_MAX = 0.9
#: A dry sample at least this likely to fall inside the run counts as a sure one.
P_CATCH_SURE = 0.8
SANITARY_EVIDENCE_TO_OPEN = 4.0
#: A level drop this large between two samples without a pump-on sample is a
#: pump cycle shorter than the sample interval.
UNSEEN_CYCLE_DROP_CM = 6.0

#: A run the float ended outpaced the inflow: its net fall is taken as at least
#: this share of the pump's learned rate, however high the inflow reads.
NET_RATE_FLOOR_SHARE = 0.25

# --- check valve / short cycling -------------------------------------------------
#: Window after pump stop in which water falling back from the riser shows up.
BACKFLOW_WINDOW = timedelta(seconds=25)
#: Inflow is measured on settled samples at least this far apart.
BACKFLOW_RATE_SPAN = timedelta(seconds=15)
#: A fill is judged at the next start, or this long after the stop.
BACKFLOW_JUDGE_AFTER = timedelta(minutes=10)
#: Smallest backflow rise counted, and the share of the line's volume expected back.
BACKFLOW_MIN_CM = 1.5
BACKFLOW_LINE_SHARE = 0.4
#: Backflow is at most the line's contents: an excess above this share of the
#: (registered, so +-20 %) line volume is inflow changing, not backflow.
BACKFLOW_MAX_LINE_SHARE = 1.5
#: A tap whose learned running pressure is at least this sits on the riser (an
#: outlet tap reads ~0 on an open line). Behind a good check valve it holds the
#: static column while the pump is off; a drop (median of the first third of the
#: off period's readings to that of the last) of COLUMN_DROP_SHARE of the running
#: pressure, at least COLUMN_DROP_MIN_KPA, is water leaking back.
RISER_TAP_MIN_KPA = 10.0
COLUMN_DROP_SHARE = 0.15
COLUMN_DROP_MIN_KPA = 4.0
#: A period with a single sample between stop and restart is judged against the
#: inflow of an earlier period only if that was measured this recently.
FALLBACK_RATE_MAX_AGE = timedelta(minutes=15)
#: The late part of an off period (where the inflow rate is fitted) starts at this
#: share of it: a leaking valve's riser has drained by then, rain has not changed.
BACKFLOW_LATE_FROM = 0.6
#: An excess is a difference of fitted levels and a minimum: this many noise sigmas.
BACKFLOW_NOISE_SIGMAS = 5.0
#: The float stops the pump at the registered off mark; a lowest level this far
#: below it means the real mark is lower and the level is used instead.
OFF_MARK_TOLERANCE_CM = 3.0
#: Lows of float stops cluster within the line's fall-back plus this (a float's
#: repeatability and the sampling of the stop are a couple of cm); a low further
#: below the cluster's median was not a float stop (stuck float: the pump drained
#: to its intake) and is not taken for the off mark.
OFF_MARK_CLUSTER_CM = 3.0
#: A run longer than this many times the site's median run did not end at the float
#: (storm runs are longer too, but their lows are the float's: leaving them out
#: only costs a sample of the off mark).
LONG_RUN_FACTOR = 4.0
#: An inflow trend (rain receding) is read from two periods' fitted late rates at
#: most this far apart: a storm's inflow changes over tens of minutes to hours, so
#: within an hour the trend between two periods is the one inside each.
TREND_MAX_GAP = timedelta(hours=1)
#: ... and only from this many periods in a row whose fitted inflow fell each time.
TREND_PERIODS = 3
#: Of the last SHORT_CYCLE_WINDOW cycles, this many with backflow open the finding;
#: at most SHORT_CYCLE_CLEAR_MAX clear it.
SHORT_CYCLE_WINDOW = 4
SHORT_CYCLE_TO_OPEN = 3
SHORT_CYCLE_CLEAR_MAX = 0
#: ... and only once no judged period has shown backflow (nor a seep) for this long:
#: a failed or leaking valve does not mend itself, and an hour of periods that hide
#: its backflow (a level sensor's noisy hour lifting the threshold, rain front-loading
#: or receding) is not a repair. Clearing on the first quiet window and opening again
#: on the next stop told a homeowner five times in a day of one failed valve.
SHORT_CYCLE_CLEAR_AFTER = timedelta(hours=3)
#: Short cycling also opens on this many returns (the level rising between two
#: samples that both read the pump on, beyond the inflow and the noise) within
#: RECIRC_SPAN: the pump restarts at once after every stop.
RECIRC_RETURNS = 3
RECIRC_SPAN = timedelta(minutes=10)
#: The window's mean must clear the threshold by this many standard errors of the
#: site's own excess (its scatter read from the differences between its last
#: SHORT_CYCLE_HISTORY periods: a failed valve's step is one difference, not scatter).
SHORT_CYCLE_SE_FACTOR = 2.0
SHORT_CYCLE_HISTORY = 12
#: With the pump off the level only rises (the pump is the pit's only outlet; a
#: liner seeping out in dry weather loses mm an hour): pump-off samples whose fitted
#: fall over their span exceeds FALL_SIGMAS standard errors of that fit, and at
#: least FALL_MIN_CM, straddle runs no sample saw and are not one off period.
FALL_SIGMAS = 3.0
FALL_MIN_CM = 1.0
#: A valve that seeps back over the whole off period leaves no kink in the fill:
#: the level rises evenly at inflow + seep. It shows as a step in the off periods'
#: fill rate (fitted on the samples after BACKFLOW_WINDOW, at least
#: SEEP_MIN_SAMPLES spanning SEEP_MIN_SPAN): SEEP_BEFORE flat periods, then
#: SEEP_AFTER flat ones whose rate is SEEP_STEP_SHARE or more above theirs, the
#: step within the one period between them (the seep began in it). Flat: the
#: group's rates spread by at most SEEP_FLAT_SHARE of the step, and their fitted
#: trend across the group at most SEEP_TREND_SHARE of it (before the step, only
#: a rising trend counts: the inflow receding is no rain). Rain raises the
#: inflow over hours (a ramp, then a recession), not as a step between two flat
#: runs of periods; and a seep's extra water per period is bounded by the line's
#: volume (it counts from SEEP_MIN_LINE_SHARE of it, up to BACKFLOW_MAX_LINE_SHARE).
#: But a short heavy shower does step the inflow up within a period, and its store
#: then recedes over hours: over 8 periods (an hour) the recession stayed inside
#: the flatness rules and opened short cycling on 8 of the sweep's 200 clean
#: site-weeks (eleventh round). A valve's seep does not recede: SEEP_AFTER periods
#: (2-4 h) are what a steady leak-back must hold for.
SEEP_BEFORE = 6
SEEP_AFTER = 24
SEEP_MIN_SAMPLES = 3
SEEP_MIN_SPAN = timedelta(seconds=45)
SEEP_STEP_SHARE = 0.25
SEEP_FLAT_SHARE = 0.5
SEEP_TREND_SHARE = 0.25
SEEP_MIN_LINE_SHARE = 0.25
#: ... and less than the line holds: a seep that gave back the whole line within an
#: off period would have emptied it before the restart, and the fill would show the
#: kink the excess measures. (A shower stepping a dry-weather inflow up 4.6-fold gave
#: 1.07 line volumes a period on clean-238; the sweep's slow leaks give 0.35-0.56.)
SEEP_MAX_LINE_SHARE = 1.0

# --- continuous run (stuck float) ------------------------------------------------
#: A normal cycle empties the band between the marks in well under a minute; a
#: pump still running with the level at the off mark has a stuck switch.
CONTINUOUS_LOW_LEVEL_MARGIN_CM = 2.0
#: "At the mark": within this of it (level noise); counts only with a starved outlet,
#: i.e. a mean flow under CONTINUOUS_STARVED_SHARE of the pump's usual flow.
CONTINUOUS_AT_MARK_CM = 1.0
CONTINUOUS_STARVED_SHARE = 0.5
CONTINUOUS_LOW_FOR = timedelta(seconds=90)
CONTINUOUS_MIN_RUN = timedelta(seconds=180)

# --- high water -----------------------------------------------------------------
HIGH_WATER_SAMPLES = 2
HIGH_WATER_CLEAR_MARGIN_CM = 2.0

# --- frozen line ----------------------------------------------------------------
FROZEN_PIPE_TEMP_C = 0.0
FROZEN_SAMPLES_TO_OPEN = 2
#: ... spanning at least this long (a refilling line is dry and pressurised for seconds).
FROZEN_MIN_SPAN = timedelta(seconds=20)
FROZEN_FLOW_SAMPLES_TO_CLEAR = 2
#: Ice has melted when the pipe has stayed above this for THAW_FOR.
THAW_PIPE_TEMP_C = 1.0
THAW_FOR = timedelta(minutes=30)
#: A pit sample older than this cannot tell whether the pump runs at a discharge sample.
PUMP_STATE_MAX_AGE = timedelta(seconds=45)

# --- icing risk -----------------------------------------------------------------
FREEZING_C = 0.0
#: Recent outlet volume that can wet and ice a walkway: about one pump cycle.
ICING_WINDOW = timedelta(hours=6)
ICING_MIN_VOLUME_L = 20.0
#: Warning becomes violation when it has frozen this long with water discharged.
ICING_VIOLATION_AFTER = timedelta(hours=1)
#: Air readings older than this are not used (the air node may be silent).
AIR_MAX_AGE = timedelta(minutes=15)
#: Distance used when a pack names none (product default, marked as such).
DEFAULT_ICING_DISTANCE_FT = 10.0

# --- findings -------------------------------------------------------------------
#: An open finding is re-emitted (UPDATED) at most this often unless its level
#: or severity changes; otherwise it is updated silently in memory.
REFRESH_EVERY = timedelta(minutes=15)

# --- cold weather (shared by frozen line and icing risk) -------------------------
#: Freezing at or below FREEZING_C; thawed only once the air has stayed above
#: THAW_AIR_C for THAW_FOR (hysteresis: sensor noise around 0 C changes nothing).
THAW_AIR_C = 1.0
#: A line can hold ice when the pipe wall at the outlet is at or below this, or the
#: air has been freezing for COLD_AIR_FOR (a buried or shaded section freezes first).
COLD_PIPE_C = 1.0
COLD_AIR_FOR = timedelta(hours=3)
#: A pipe reading older than this says nothing about the line now.
PIPE_MAX_AGE = timedelta(minutes=15)

# --- a run that does not drain the pit (pump failure or blocked line) -------------
#: A run is judged stalled once it has lasted this long over at least STALL_SAMPLES
#: pit samples: a normal run empties the float band in 15-70 s.
STALL_AFTER = timedelta(seconds=120)
#: A stall needs water above the off mark by this (plus 3 noise sigmas): a pump
#: held on at the bottom of the pit has nothing left to drain.
STALL_ABOVE_OFF_CM = 2.0
STALL_SAMPLES = 3
#: Stalled: the pump's effective drain (level fall rate + inflow) is under this share
#: of the site's learned drain rate, or under STALL_MIN_CM_S before one is learned
#: (30 L/min in an 18 in basin is ~0.3 cm/s; a stall moves ~nothing).
STALL_SHARE = 0.25
STALL_MIN_CM_S = 0.06
#: Outlet flow at or above FLOW_PRESENT_LPM in this window means the pump moves water.
STALL_OUTLET_WINDOW = timedelta(seconds=60)
#: A fall of the level between two on-samples counts beyond this many sigmas of a
#: difference of two readings (4 x sqrt(2) x the level noise) plus SWING_MIN_CM: a
#: level that drains again between the samples of a run under way is a pump moving
#: water (stopping and restarting faster than the node reports), never a stall.
SWING_NOISE_SIGMAS = 4.0
SWING_MIN_CM = 1.0

# --- pump failure -----------------------------------------------------------------
#: Level above the on mark (the higher of the registered and the learned one) by
#: this margin (or a quarter of the float band), for NO_START_FOR, with the pump off.
NO_START_MARGIN_CM = 5.0
NO_START_FOR = timedelta(seconds=120)
#: A motor running draws amps; under this the commanded pump is not turning.
NO_CURRENT_A = 0.3
#: A pump dead-heading against a plug draws ~75-85 % of its running current (a
#: centrifugal pump at shut-off head still takes most of its power); one running
#: unloaded (air lock, impeller off its shaft) its no-load current, ~50-60 %. A
#: stalled run drawing under this share of the site's learned running current is
#: the pump, not ice.
DEADHEAD_CURRENT_SHARE = 0.65
#: The site's pump must have been seen drawing at least this before "no current" counts.
RUNNING_CURRENT_A = 1.0
NO_CURRENT_FOR = timedelta(seconds=30)
#: The finding clears once none of the signatures has held for this long.
PUMP_FAILURE_CLEAR_AFTER = timedelta(minutes=5)

# --- sanitary diversion (per-site water balance) ---------------------------------
#: Physical prior on a healthy site's outlet/pit ratio: the registered diameter may
#: be +-15 % off (area +-32 %: 0.76-1.47), and a run shorter than two sample
#: intervals is timed only to an interval (a steady phase between cycles and
#: samples can bias a site's ratio by up to 2x either way; calibration absorbs a
#: steady bias, the band must admit it). Blocks outside it never calibrate.
HEALTHY_RATIO_LOW = 0.5
HEALTHY_RATIO_HIGH = 2.0
#: ... and while no run has been timed by two on-samples (runs shorter than the pit
#: interval are timed by midpoints: a steady phase can make them read 2/3 short).
HEALTHY_RATIO_LOW_UNTIMED = 0.4
#: Before calibration the share is judged against the lowest healthy ratio.
PRIOR_RATIO = 0.55
#: Blocks calibrate the site's normal ratio once this many clean ones are seen.
CALIBRATION_MIN_BLOCKS = 4
CALIBRATION_KEEP = 25
#: A block pools cycles until the count of outlet samples inside their runs (and so
#: the block's outlet volume) is known to BLOCK_REL_ERROR, each run's count being
#: off by up to one sample: one cycle when a run spans several samples, ~40 runs of
#: 10 s at 30 s sampling (0 or 1 sample each), or BLOCK_MAX_CYCLES.
BLOCK_REL_ERROR = 0.25
BLOCK_MAX_CYCLES = 120
#: Outlet readings below this are the meter's idle noise between runs, not water.
IDLE_FLOW_LPM = 2.0
#: Smallest diversion share the product must detect: the sequential test weighs
#: share 0 against it, and its reference (half of it) bounds how uncertain a storm's
#: inflow term may be before only the drawdown is kept. The test's own height and
#: per-block weights live with the detector (``detectors/sanitary.py``).
MIN_DIVERSION_SHARE = 0.25
CUSUM_REFERENCE = MIN_DIVERSION_SHARE / 2
#: The recent fills' relative scatter is never taken below this when the inflow's
#: uncertainty is estimated (a fill is two noisy levels a minute or more apart).
SCATTER_FLOOR = 0.08
#: Clearing: the downward test reaches the same height AND no block has looked
#: diverted (share >= DIVERTED_LOOKING) for SANITARY_CLEAR_AFTER.
DIVERTED_LOOKING = 0.2
SANITARY_CLEAR_AFTER = timedelta(minutes=30)
#: A cycle counts only if it ended near the off mark (a blocked line never gets
#: there) and moved at least this share of the registered band volume.
CYCLE_END_TOLERANCE_CM = 5.0
MIN_BAND_SHARE = 0.4
#: An outlet flowing within this share of its calibrated rate while running is not
#: diverted: a volume deficit up to the line's volume is then a refill (leak-back).
RATE_NORMAL_SHARE = 0.12
#: A cycle whose estimated inflow during the run is over this share of the pumped
#: volume (a storm the pump barely keeps up with) is not judged: that inflow is
#: known only from the fills before it and dominates the balance.
MAX_INFLOW_SHARE = 0.5
#: Outlet flow that reaches the node after the pit's end-of-cycle sample (line lag).
OUTLET_LAG_MIN = timedelta(seconds=20)

#: Late readings of one node this close (device time) to a not-evaluated span extend
#: it rather than open a new one: one outage's replay is one span on the chart.
NOT_EVALUATED_MERGE = timedelta(minutes=30)
#: Sequence numbers remembered per boot of a node (a window below its highest) to tell
#: a QoS 1 redelivery (ignored silently) from a late reading never seen (recorded as not
#: evaluated). Covers several hours at the fastest node interval; a redelivery comes
#: within seconds.
IDENTITIES_KEPT = 4096
