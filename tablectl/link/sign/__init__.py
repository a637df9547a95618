"""The meter sign: a web page per link, updated live by server-sent events."""
