"""Software simulators of every device, built from the production codec."""
