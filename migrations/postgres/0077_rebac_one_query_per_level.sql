-- sdk-rebac: the walk reads each level with one query. The next frontier
-- (the level's new personas) is aggregated by the level query itself
-- instead of by a second query over the keys of the level's map, which
-- halves the statements a check runs. The walk, its answers and its
-- budget are unchanged (see 0055); the generic plan of 0076 is kept.
CREATE OR REPLACE FUNCTION rebac_reaches(p_tenant TEXT, p_subject TEXT, p_relation TEXT, p_target TEXT, p_max_depth BIGINT, p_max_nodes BIGINT,
    OUT decision TEXT, OUT path TEXT, OUT depth_used BIGINT, OUT nodes_visited BIGINT, OUT exhausted BOOLEAN)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    parents JSONB := jsonb_build_object(p_subject, NULL);
    seen BIGINT := 1;
    frontier TEXT[] := ARRAY[p_subject];
    fresh JSONB;
    fresh_count BIGINT;
    hit TEXT;
    at TEXT;
BEGIN
    depth_used := 0;
    exhausted := FALSE;
    WHILE cardinality(frontier) > 0 LOOP
        IF depth_used = p_max_depth THEN
            decision := 'indeterminate';
            nodes_visited := seen;
            exhausted := TRUE;
            RETURN;
        END IF;
        depth_used := depth_used + 1;
        SELECT coalesce(jsonb_object_agg(e.o, e.s) FILTER (WHERE NOT parents ? e.o), '{}'::jsonb),
               count(*) FILTER (WHERE NOT parents ? e.o),
               min(e.s) FILTER (WHERE e.o = p_target),
               coalesce(array_agg(e.o) FILTER (WHERE NOT parents ? e.o), '{}')
          INTO fresh, fresh_count, hit, frontier
          FROM (SELECT object_persona_id AS o, min(subject_persona_id) AS s
                  FROM rebac_relationship
                 WHERE tenant_id = p_tenant AND relation = p_relation AND subject_persona_id = ANY (frontier)
                 GROUP BY object_persona_id) e;
        IF hit IS NOT NULL THEN
            path := p_target;
            at := hit;
            WHILE at IS NOT NULL LOOP
                path := at || ',' || path;
                at := parents ->> at;
            END LOOP;
            decision := 'allow';
            nodes_visited := seen + CASE WHEN parents ? p_target THEN 0 ELSE 1 END;
            RETURN;
        END IF;
        IF seen + fresh_count > p_max_nodes THEN
            decision := 'indeterminate';
            nodes_visited := p_max_nodes;
            exhausted := TRUE;
            RETURN;
        END IF;
        parents := parents || fresh;
        seen := seen + fresh_count;
    END LOOP;
    decision := 'deny';
    nodes_visited := seen;
END
$$;
