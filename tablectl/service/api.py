"""The service's public entry points, for what drives a table from outside (the simulators'
demo, the journal sessions tests write, benches): run a table (`Daemon`), replay its journal
(`replay`), and journal a step's input and records exactly as the daemon does.

The simulators import nothing else of the service (an import-linter contract in `make check`;
docs/design.md, "Layers"): what they need of it is named here, so the service's modules can
change behind it.
"""

from __future__ import annotations

from tablectl.service.daemon import Daemon
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.service.replay import ReplayResult, replay

__all__ = ["Daemon", "ReplayResult", "journal_entries", "journal_input", "replay"]
