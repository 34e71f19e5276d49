"""Ordinance rule packs, the installation audit and the streaming detectors.

Entry points: :func:`gateway.rules.pack.load_packs`, :class:`gateway.rules.engine.RulesEngine`,
:func:`gateway.rules.audit.audit_sites`, :class:`gateway.state.findings.FindingRepository`.
"""
