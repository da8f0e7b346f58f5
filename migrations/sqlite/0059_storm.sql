-- Operator storm ingest: storm reports keyed by (provider, the provider's
-- id), upserted so a repeated ingest changes nothing, and the 0.1-degree
-- grid cells they fall in, recomputed from the reports of each cell.
CREATE TABLE storm_event (
    provider    TEXT NOT NULL,
    source_id   TEXT NOT NULL,
    kind        TEXT NOT NULL,
    occurred_at TEXT NOT NULL,
    lat         REAL NOT NULL,
    lon         REAL NOT NULL,
    magnitude   REAL NOT NULL,
    cell_id     TEXT NOT NULL,
    ingested_at TEXT NOT NULL,
    PRIMARY KEY (provider, source_id)
);
CREATE INDEX storm_event_cell ON storm_event (cell_id, kind);

CREATE TABLE storm_cell (
    cell_id       TEXT NOT NULL,
    kind          TEXT NOT NULL,
    event_count   BIGINT NOT NULL,
    max_magnitude REAL NOT NULL,
    last_event_at TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (cell_id, kind)
);
