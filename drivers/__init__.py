"""Device drivers: transports, the reference wire codec, one driver per device, GPIO."""
