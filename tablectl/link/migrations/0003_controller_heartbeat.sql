-- 0003: each link controller's last replicated write (docs/linked-progressives.md, "Failover").
-- A controller broadcasts `up`, and acknowledges what it read, only after a COMMIT of its own
-- returns, and on a replicated ledger a COMMIT returns once the synchronous standby has it (and
-- everything written before it). A COMMIT that wrote nothing does not wait for the standby, so
-- the controller's probe writes this row: its time is also when the controller last knew the
-- ledger took writes.
CREATE TABLE link_controller (
    controller_id text        PRIMARY KEY,
    confirmed_at  timestamptz NOT NULL
);
