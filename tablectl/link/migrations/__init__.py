"""Versioned SQL migrations of the link ledger, applied in order by `tablectl link migrate`."""
