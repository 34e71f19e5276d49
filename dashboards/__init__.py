"""Dashboards shipped with SumpWatch: the web pages (package data) and Grafana's JSON."""
