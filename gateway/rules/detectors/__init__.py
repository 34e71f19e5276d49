"""Per-site stateful detectors (small classes, one rule id each)."""
