"""tablectl's conformance scenarios against this driver and its simulator (the kit's report:
`tablectl test driver asciishuffler --markdown conformance.md`)."""

from tablectl.conformance.plugin import test_driver_conformance

__all__ = ["test_driver_conformance"]
