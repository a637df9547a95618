"""The floor's link controller: linked progressive meters kept in PostgreSQL.

Beside the table PCs, not on them: `contract.py` (what tables and controllers say to each
other over MQTT), `config.py` (the controller's config), `ledger.py` (the PostgreSQL schema's
transactions: contributions, claims, awards, verification, reports), `controller.py` (the
stateless service: applies each table's rows exactly once and acks after COMMIT),
`broadcast.py` (each link's retained state), `sign/` (the web meter sign). It may use core,
rules, util and the MQTT contract; never tablectl.service. See docs/linked-progressives.md.
"""
