"""Collectors: each records one kind of activity into the active session's trace."""
