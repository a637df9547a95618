"""Dealing shoes: one module per protocol (what the table needs of one: drivers/api.py)."""
