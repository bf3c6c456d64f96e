"""Sweep: a stored plan executed (``sweep``), each batch sent only while the run still holds its lease
(``lease_watch``)."""
