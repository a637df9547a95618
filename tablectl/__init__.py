"""tablectl: controller daemon for casino table-game hardware."""

__version__ = "0.1.0"
