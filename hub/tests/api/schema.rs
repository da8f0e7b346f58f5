//! Backend parity: both migration folders produce the same tables,
//! columns, column types (after the dialect mapping) and indexes.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::helpers::fresh_postgres_url;

#[tokio::test]
async fn sqlite_and_postgres_schemas_have_the_same_tables_columns_types_and_indexes() {
    let Some(pg_url) = fresh_postgres_url().await else {
        eprintln!("HUB_TEST_POSTGRES_URL not set: parity needs both backends");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = hub_kernel::db::Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("p.db").display())).await.unwrap();
    sqlite.migrate().await.unwrap();
    let pg = hub_kernel::db::Db::connect(&pg_url).await.unwrap();
    pg.migrate().await.unwrap();

    // Table -> (column, type class), with each backend's types mapped to
    // the class the project's SQL relies on.
    let class = |t: &str| -> String {
        match t.to_ascii_lowercase().as_str() {
            "text" => "text",
            "integer" | "bigint" | "int" | "int8" | "int4" | "smallint" => "integer",
            "blob" | "bytea" => "bytes",
            "real" | "double precision" | "float8" => "real",
            other => return format!("unmapped:{other}"),
        }
        .to_string()
    };
    let mut lite: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%'")
        .fetch_all(&sqlite.read)
        .await
        .unwrap();
    // The search index is each backend's own (see
    // docs/compatibility.md, sdk-search): SQLite's FTS5 table and its shadow
    // tables, PostgreSQL's tsvector column and its GIN index.
    let tables: Vec<String> = tables.into_iter().filter(|t| !t.starts_with("search_fts")).collect();
    for t in &tables {
        let cols = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT name, type FROM pragma_table_info('{t}') ORDER BY name")))
            .fetch_all(&sqlite.read)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get::<String, _>(0), class(&r.get::<String, _>(1))))
            .collect();
        lite.insert(t.clone(), cols);
    }
    let mut post: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let rows = sqlx::query(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT), CAST(data_type AS TEXT) FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name NOT LIKE '_sqlx%' ORDER BY table_name, column_name",
    )
    .fetch_all(&pg.read)
    .await
    .unwrap();
    for r in rows {
        if (r.get::<String, _>(0), r.get::<String, _>(1)) == ("search_document".into(), "tsv".into()) {
            continue;
        }
        post.entry(r.get::<String, _>(0)).or_default().push((r.get::<String, _>(1), class(&r.get::<String, _>(2))));
    }
    assert!(lite.len() >= 15, "{lite:?}");
    assert_eq!(lite, post);

    // The indexes the migrations create (not those behind PRIMARY KEY or
    // UNIQUE constraints, which each backend names its own way), with their
    // table and uniqueness.
    let mut lite_idx: Vec<(String, String, bool)> = Vec::new();
    for t in &tables {
        for r in
            sqlx::query(sqlx::AssertSqlSafe(format!("SELECT name, \"unique\", origin FROM pragma_index_list('{t}')"))).fetch_all(&sqlite.read).await.unwrap()
        {
            if r.get::<String, _>(2) == "c" {
                lite_idx.push((t.clone(), r.get::<String, _>(0), r.get::<i64, _>(1) == 1));
            }
        }
    }
    lite_idx.sort();
    let mut post_idx: Vec<(String, String, bool)> = sqlx::query(
        "SELECT CAST(t.relname AS TEXT), CAST(i.relname AS TEXT), CAST(CASE WHEN x.indisunique THEN 1 ELSE 0 END AS BIGINT) \
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace n ON n.oid = t.relnamespace \
         WHERE n.nspname = 'public' AND t.relname NOT LIKE '_sqlx%' \
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
    )
    .fetch_all(&pg.read)
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1), r.get::<i64, _>(2) == 1))
    .collect();
    post_idx.retain(|(_, index, _)| index != "search_document_tsv");
    post_idx.sort();
    assert!(lite_idx.len() >= 10, "{lite_idx:?}");
    assert_eq!(lite_idx, post_idx);
}

/// Migration 6 gives chains an integer key: on a schema built up to
/// migration 5, an intact chain keeps verifying, entries whose head was
/// deleted get a head that fails them, and afterwards a head with entries
/// cannot be deleted nor a seq repeated in a chain.
async fn chain_ids_migration_keeps_chains_verifiable(database_url: String) {
    use hub_kernel::audit::chain::{self, Fields};
    let db = hub_kernel::db::Db::connect(&database_url).await.unwrap();
    db.migrate_to(5).await.unwrap();
    let (intact, orphan) = ("11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222");
    // Three entries of (intact, 0) with their head; two of (orphan, 2)
    // whose head row is gone.
    for (tenant, pool, n, head) in [(intact, 0_i64, 3_i64, true), (orphan, 2, 2, false)] {
        let mut prev = [0u8; 32];
        for seq in 1..=n {
            let entry_id = uuid::Uuid::now_v7().to_string();
            let payload = format!("{{\"n\":{seq}}}");
            let digest = chain::payload_digest(&payload);
            let fields = Fields {
                entry_id: &entry_id,
                tenant_id: tenant,
                pool_index: pool,
                seq,
                event_type: "crm.call.logged.v1",
                actor_kind: "user",
                actor_id: "ada",
                actor_chain: None,
                occurred_at: "2026-11-01T00:00:00.000000Z",
                retention_class: "operational",
                payload_digest: &digest,
            };
            let hash = chain::entry_hash(&prev, &fields);
            sqlx::query(
                "INSERT INTO audit_entry (entry_id, tenant_id, pool_index, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, \
                 retention_class, payload, payload_digest, prev_hash, entry_hash) \
                 VALUES ($1, $2, $3, $4, 'crm.call.logged.v1', 'user', 'ada', NULL, '2026-11-01T00:00:00.000000Z', 'operational', $5, $6, $7, $8)",
            )
            .bind(&entry_id)
            .bind(tenant)
            .bind(pool)
            .bind(seq)
            .bind(&payload)
            .bind(digest.to_vec())
            .bind(prev.to_vec())
            .bind(hash.to_vec())
            .execute(db.writer())
            .await
            .unwrap();
            prev = hash;
        }
        if head {
            sqlx::query("INSERT INTO audit_chain_head (tenant_id, pool_index, seq, head_hash, updated_at) VALUES ($1, $2, $3, $4, '2026-11-01T00:00:00Z')")
                .bind(tenant)
                .bind(pool)
                .bind(n)
                .bind(prev.to_vec())
                .execute(db.writer())
                .await
                .unwrap();
        }
    }
    db.migrate().await.unwrap();

    let heads: Vec<(String, i64, i64, i64)> =
        sqlx::query_as("SELECT tenant_id, pool_index, chain_id, seq FROM audit_chain_head ORDER BY tenant_id").fetch_all(&db.read).await.unwrap();
    assert_eq!(heads.iter().map(|h| (h.0.as_str(), h.1, h.3)).collect::<Vec<_>>(), vec![(intact, 0, 3), (orphan, 2, 2)]);
    assert_ne!(heads[0].2, heads[1].2);
    for (tenant, _, chain_id, seq) in &heads {
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT chain_id FROM audit_entry WHERE tenant_id = $1 ORDER BY seq").bind(tenant).fetch_all(&db.read).await.unwrap();
        assert_eq!(ids, vec![*chain_id; *seq as usize]);
    }
    let v = chain::verify(&db, intact, 0).await.unwrap();
    assert_eq!(serde_json::to_value(&v).unwrap(), serde_json::json!({ "pool_index": 0, "ok": true, "entries_checked": 3 }));
    let v = chain::verify(&db, orphan, 2).await.unwrap();
    assert_eq!(
        serde_json::to_value(&v).unwrap(),
        serde_json::json!({ "pool_index": 2, "ok": false, "entries_checked": 2, "failed_seq": 2, "reason": "wrong-hash" })
    );
    assert_eq!(chain::pools_of(&db.read, orphan).await.unwrap(), vec![2]);

    let gone = sqlx::query("DELETE FROM audit_chain_head WHERE tenant_id = $1").bind(intact).execute(db.writer()).await;
    assert!(gone.is_err(), "a head with entries was deleted");
    let again = sqlx::query("UPDATE audit_entry SET seq = 1 WHERE tenant_id = $1 AND seq = 2").bind(intact).execute(db.writer()).await;
    assert!(again.is_err(), "a seq was repeated in a chain");
}

#[tokio::test]
async fn sqlite_chain_ids_migration_keeps_chains_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    chain_ids_migration_keeps_chains_verifiable(format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display())).await;
}

#[tokio::test]
async fn postgres_chain_ids_migration_keeps_chains_verifiable() {
    match fresh_postgres_url().await {
        Some(url) => chain_ids_migration_keeps_chains_verifiable(url).await,
        None => eprintln!("HUB_TEST_POSTGRES_URL not set: skipped"),
    }
}
