-- sdk-rebac: the check's walk as one server-side function, so a check is
-- one round trip however deep the path (the walk in Rust took one round
-- trip per step). Level by level from the subject along one relation:
-- a level that reaches the target allows (the smallest subject leading
-- there is the path's last step); otherwise its new personas (each with
-- the smallest subject leading to it as parent) join the walk, unless
-- they would pass `max_nodes` (indeterminate); `max_depth` levels taken
-- with personas left to expand is indeterminate too. The SQLite build
-- runs the same walk in Rust (hub/governance/src/rebac.rs): both answer
-- alike, decisions, paths and budgets.
CREATE FUNCTION rebac_reaches(p_tenant TEXT, p_subject TEXT, p_relation TEXT, p_target TEXT, p_max_depth BIGINT, p_max_nodes BIGINT,
    OUT decision TEXT, OUT path TEXT, OUT depth_used BIGINT, OUT nodes_visited BIGINT, OUT exhausted BOOLEAN)
LANGUAGE plpgsql STABLE AS $$
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
               min(e.s) FILTER (WHERE e.o = p_target)
          INTO fresh, fresh_count, hit
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
        SELECT coalesce(array_agg(k), '{}') INTO frontier FROM jsonb_object_keys(fresh) AS k;
    END LOOP;
    decision := 'deny';
    nodes_visited := seen;
END
$$;
