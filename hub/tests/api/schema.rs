//! Backend parity: both migration folders produce the same tables and
//! columns.

use std::collections::BTreeMap;

use sqlx::Row;

use crate::helpers::fresh_postgres_url;

#[tokio::test]
async fn sqlite_and_postgres_schemas_have_the_same_tables_and_columns() {
    let Some(pg_url) = fresh_postgres_url().await else {
        eprintln!("HUB_TEST_POSTGRES_URL not set: parity needs both backends");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = hub::db::Db::connect(&format!("sqlite://{}?mode=rwc", dir.path().join("p.db").display())).await.unwrap();
    sqlite.migrate().await.unwrap();
    let pg = hub::db::Db::connect(&pg_url).await.unwrap();
    pg.migrate().await.unwrap();

    let mut lite: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let tables: Vec<String> = sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%'")
        .fetch_all(&sqlite.read)
        .await
        .unwrap();
    for t in tables {
        let cols = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT name FROM pragma_table_info('{t}') ORDER BY name")))
            .fetch_all(&sqlite.read)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
        lite.insert(t, cols);
    }
    let mut post: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows = sqlx::query(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT) FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name NOT LIKE '_sqlx%' ORDER BY table_name, column_name",
    )
    .fetch_all(&pg.read)
    .await
    .unwrap();
    for r in rows {
        post.entry(r.get::<String, _>(0)).or_default().push(r.get::<String, _>(1));
    }
    assert!(lite.len() >= 15, "{lite:?}");
    assert_eq!(lite, post);
}
