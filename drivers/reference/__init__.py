"""The reference device protocol: framing, messages, the polled-device link, device codecs."""
