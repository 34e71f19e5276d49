"""Jinja2 templates and static files of the pages: the shared kit in
:mod:`gateway.pages`, re-exported for the page modules that import it from here."""

from __future__ import annotations

from gateway.pages import STATIC_DIR, TEMPLATES_DIR, WEB_DIR, render, templates

__all__ = ["STATIC_DIR", "TEMPLATES_DIR", "WEB_DIR", "render", "templates"]
