-- sdk-dispatch: optimised routes. The stops are kept in their optimised
-- order as one JSON document (a route is written once and read whole);
-- start_point is a JSON point, or null when the route begins at its first
-- stop.
CREATE TABLE dispatch_route (
    route_id        TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL REFERENCES tenant_tenant (tenant_id),
    persona_id      TEXT NOT NULL,
    start_point     TEXT NOT NULL,
    stops           TEXT NOT NULL,
    stop_count      INTEGER NOT NULL,
    total_km        DOUBLE PRECISION NOT NULL,
    given_order_km  DOUBLE PRECISION NOT NULL,
    drive_minutes   DOUBLE PRECISION NOT NULL,
    total_minutes   DOUBLE PRECISION NOT NULL,
    avg_speed_kmh   DOUBLE PRECISION NOT NULL,
    created_by      TEXT NOT NULL,
    optimized_at    TEXT NOT NULL
);
