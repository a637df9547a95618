"""Transports: bytes to and from a device, whatever carries them (serial, TCP, USB, memory)."""
