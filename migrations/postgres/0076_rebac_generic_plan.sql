-- sdk-rebac: the walk's level query under one generic plan. Its frontier
-- is an array parameter, so the plan cache judged every custom plan
-- cheaper and planned the query anew at each level of each check (about
-- half of a four-level check's time). The generic plan reads the
-- primary key like the custom ones.
ALTER FUNCTION rebac_reaches(TEXT, TEXT, TEXT, TEXT, BIGINT, BIGINT) SET plan_cache_mode = force_generic_plan;
