-- 0001: the link ledger (docs/linked-progressives.md, "The ledger").
-- Applied by `tablectl link migrate`, in one transaction with its row in link_schema_version.

-- One row per link: its lock is the serialisation point of everything that happens on it, and
-- its version (not a sequence: sequences have gaps) the total order of its events.
CREATE TABLE link (
    link_id            text PRIMARY KEY,
    version            bigint  NOT NULL CHECK (version >= 0),
    state              text    NOT NULL CHECK (state IN ('closed', 'operating')),
    parameters_version integer NOT NULL CHECK (parameters_version >= 1),
    parameters         text    NOT NULL,  -- canonical JSON of the LinkDefinition
    parameters_sha256  text    NOT NULL
);

-- One row per link level (meter), changed only under its link's lock. Amounts are in
-- ten-thousandths of a cent (units): exact, as the tables' own meters carry them.
CREATE TABLE link_level (
    link_id        text    NOT NULL REFERENCES link,
    level_id       text    NOT NULL,
    position       integer NOT NULL,
    display_units  bigint  NOT NULL CHECK (display_units >= 0),
    reserve_units  bigint  NOT NULL DEFAULT 0 CHECK (reserve_units >= 0),
    overflow_units bigint  NOT NULL DEFAULT 0 CHECK (overflow_units >= 0),
    version        bigint  NOT NULL,  -- the link version that last changed this level
    PRIMARY KEY (link_id, level_id)
);

-- Each linked table: the highest seq of its event stream applied (the controllers' ack).
CREATE TABLE link_table (
    table_ref         text   PRIMARY KEY,  -- site/table
    link_id           text   REFERENCES link,  -- NULL: taken off its link (its cursor is kept)
    acked_through_seq bigint NOT NULL DEFAULT 0 CHECK (acked_through_seq >= 0),
    online            boolean  -- its last retained status (NULL: never heard)
);

-- The audit trail: every contribution, hit, reset, parameter change and link up/down, in
-- the link's version order, append-only (trigger below), each row chained to the one before
-- by SHA-256. Each row balances: what its pools gained is what was contributed, plus what
-- the operator put in (initial and reset amounts), minus what was awarded.
CREATE TABLE link_event (
    link_id            text        NOT NULL REFERENCES link,
    version            bigint      NOT NULL CHECK (version >= 1),
    kind               text        NOT NULL CHECK (kind IN (
        'link.created', 'level.initialized', 'parameters.changed', 'link.opened',
        'link.closed', 'table.online', 'table.offline', 'contribution',
        'contribution.refused', 'award', 'meter.reset', 'claim.refused', 'award.validated')),
    at                 timestamptz NOT NULL,  -- set by the trigger: the ledger's clock
    controller         text        NOT NULL,
    table_ref          text,
    seq                bigint,  -- the table's journal row this event applies
    level_id           text,
    round_id           bigint,
    seat               integer,
    claim_id           text,
    ref_version        bigint,  -- the event this one refers to (a reset's or validation's award)
    wager_cents        bigint,
    rate_bp            integer,
    contribution_units bigint      NOT NULL DEFAULT 0,
    display_units      bigint      NOT NULL DEFAULT 0,
    reserve_units      bigint      NOT NULL DEFAULT 0,
    overflow_units     bigint      NOT NULL DEFAULT 0,
    seed_units         bigint      NOT NULL DEFAULT 0,
    award_cents        bigint      NOT NULL DEFAULT 0,
    detail             text        NOT NULL DEFAULT '{}',  -- canonical JSON
    prev_sha256        bytea       NOT NULL,
    sha256             bytea       NOT NULL,
    PRIMARY KEY (link_id, version),
    CONSTRAINT link_event_balances CHECK (
        display_units + reserve_units + overflow_units
        = contribution_units + seed_units - award_cents * 10000)
);

-- Every table row is applied at most once, whichever controller applies it.
CREATE UNIQUE INDEX link_event_table_row ON link_event (table_ref, seq) WHERE seq IS NOT NULL;
CREATE INDEX link_event_claim ON link_event (link_id, table_ref, claim_id)
    WHERE claim_id IS NOT NULL;
CREATE INDEX link_event_ref ON link_event (link_id, ref_version) WHERE ref_version IS NOT NULL;
CREATE INDEX link_event_at ON link_event (at);
CREATE INDEX link_event_award ON link_event (link_id, level_id, version) WHERE kind = 'award';

-- The chain: the previous row's hash and this row's, computed here so that no writer can
-- chain a row wrongly. `tablectl link verify` recomputes them independently.
CREATE FUNCTION link_event_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    previous bytea;
BEGIN
    IF NEW.version = 1 THEN
        previous := decode(repeat('00', 32), 'hex');
    ELSE
        SELECT e.sha256 INTO previous FROM link_event e
            WHERE e.link_id = NEW.link_id AND e.version = NEW.version - 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'link %: event % has no event % before it',
                NEW.link_id, NEW.version, NEW.version - 1;
        END IF;
    END IF;
    NEW.at := clock_timestamp();
    NEW.prev_sha256 := previous;
    NEW.sha256 := sha256(convert_to(concat_ws(E'\x1f',
        encode(previous, 'hex'), NEW.link_id, NEW.version::text, NEW.kind,
        to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), NEW.controller,
        coalesce(NEW.table_ref, ''), coalesce(NEW.seq::text, ''), coalesce(NEW.level_id, ''),
        coalesce(NEW.round_id::text, ''), coalesce(NEW.seat::text, ''),
        coalesce(NEW.claim_id, ''), coalesce(NEW.ref_version::text, ''),
        coalesce(NEW.wager_cents::text, ''), coalesce(NEW.rate_bp::text, ''),
        NEW.contribution_units::text, NEW.display_units::text, NEW.reserve_units::text,
        NEW.overflow_units::text, NEW.seed_units::text, NEW.award_cents::text, NEW.detail),
        'UTF8'));
    RETURN NEW;
END
$$;

CREATE TRIGGER link_event_chain BEFORE INSERT ON link_event
    FOR EACH ROW EXECUTE FUNCTION link_event_chain();

CREATE FUNCTION link_event_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'link_event is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER link_event_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON link_event
    FOR EACH STATEMENT EXECUTE FUNCTION link_event_append_only();

-- The NJ 13:69E-1.39A meters of each level, derived from the events: Progressive In (all
-- contributions), Display, Hits, Wins, Overflow and the Reserve (hidden) pool.
CREATE VIEW link_level_meters AS
SELECT lv.link_id,
       lv.level_id,
       lv.position,
       coalesce(sum(e.contribution_units) FILTER (WHERE e.kind = 'contribution'), 0)::bigint
           AS progressive_in_units,
       coalesce(sum(e.display_units), 0)::bigint AS display_units,
       count(e.version) FILTER (WHERE e.kind = 'award') AS hits,
       coalesce(sum(e.award_cents), 0)::bigint AS wins_cents,
       coalesce(sum(e.overflow_units), 0)::bigint AS overflow_units,
       coalesce(sum(e.reserve_units), 0)::bigint AS reserve_units,
       coalesce(sum(e.seed_units), 0)::bigint AS seed_units,
       coalesce(sum(e.seed_units) FILTER (WHERE e.kind = 'level.initialized'), 0)::bigint
           AS initial_units,
       lv.display_units AS row_display_units,
       lv.reserve_units AS row_reserve_units,
       lv.overflow_units AS row_overflow_units
FROM link_level lv
LEFT JOIN link_event e ON e.link_id = lv.link_id AND e.level_id = lv.level_id
GROUP BY lv.link_id, lv.level_id, lv.position, lv.display_units, lv.reserve_units,
         lv.overflow_units;

-- Awards a floorperson has not validated yet: JACKPOT PENDING.
CREATE VIEW link_pending_awards AS
SELECT a.*
FROM link_event a
WHERE a.kind = 'award'
  AND NOT EXISTS (
      SELECT 1 FROM link_event v
      WHERE v.link_id = a.link_id AND v.kind = 'award.validated' AND v.ref_version = a.version);
