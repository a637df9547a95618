"""A tablectl driver for the ACME line shuffler (line-based ASCII), with its simulator."""
