"""Enforcement cases: notices, orders, inspections, waivers, the ledger and evidence
packets, per the rule packs' [enforcement] sections (docs/enforcement.md)."""
