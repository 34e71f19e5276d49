"""Pages for people: the homeowner dashboard and the public-works console (issue 8).

Wiring: :func:`gateway.web.setup.install_web`; design notes in docs/ui.md.
"""
