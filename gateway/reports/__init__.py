"""Winter monitoring reports (issue 9): per property and village-wide, as PDF, HTML and CSV.

Assemble (:mod:`gateway.reports.assemble`) builds frozen report data from the
store's rollups, the findings, the installation audit, the alerts and the rule
pack; the renderers (:mod:`render_pdf`, :mod:`render_html`, :mod:`render_csv`)
only format it. :func:`gateway.reports.service.build_winter_report` is the one
entry point of the CLI, the API router and the scheduler.
"""
