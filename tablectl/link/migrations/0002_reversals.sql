-- 0002: a voided round's contributions taken back (docs/linked-progressives.md, "A voided
-- round"). A table journals `link.contribution_reversed` for each contribution of a round it
-- voids after the count; the controller applies it once, keyed by (table_ref, seq) like every
-- row: a `contribution.reversed` event takes off each pool exactly what the contribution's
-- event put on (its negative contribution_units keep the row balanced), naming that event in
-- ref_version. A reversal that names no applied contribution is `reversal.refused`.

ALTER TABLE link_event DROP CONSTRAINT link_event_kind_check;
ALTER TABLE link_event ADD CONSTRAINT link_event_kind_check CHECK (kind IN (
    'link.created', 'level.initialized', 'parameters.changed', 'link.opened',
    'link.closed', 'table.online', 'table.offline', 'contribution',
    'contribution.refused', 'award', 'meter.reset', 'claim.refused', 'award.validated',
    'contribution.reversed', 'reversal.refused'));

-- A reversal finds its contribution by the table, round, seat and level it names.
CREATE INDEX link_event_contribution ON link_event (link_id, table_ref, round_id)
    WHERE kind = 'contribution';

-- Progressive In is net of reversals: a voided round's wagers were returned.
CREATE OR REPLACE VIEW link_level_meters AS
SELECT lv.link_id,
       lv.level_id,
       lv.position,
       coalesce(sum(e.contribution_units)
           FILTER (WHERE e.kind IN ('contribution', 'contribution.reversed')), 0)::bigint
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
