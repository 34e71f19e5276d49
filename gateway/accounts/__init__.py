"""Accounts and roles: users, password hashing, sessions, CSRF, API tokens, the
access-control dependency, login rate limiting and security headers (issue 8, 7).

Wiring lives in :mod:`gateway.accounts.setup`; routers use
:mod:`gateway.accounts.access` (``PrincipalDep``, ``ScopeDep``, ``require_role``).
"""
