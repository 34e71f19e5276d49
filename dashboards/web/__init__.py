"""Templates and static assets of the pages, loaded as package data by gateway.pages."""
