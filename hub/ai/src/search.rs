//! sdk-search: full-text search over the caller's tenant (crm contacts and
//! leads, content items, incidents), in the index their own writes keep
//! (`hub_kernel::search`). `POST /api/search` takes the DSL body
//! `{ query, size, from, sort }`; `GET /api/search?q=&size=&from=&sort=`
//! is the same execution. The tenant is the credential's; the kinds
//! searched are those the caller may read (an API key's scopes, a
//! person's role permissions), resolved here, server-side. A document
//! matches when it holds every word of the query.

use hub_kernel::{
    gate::{keys, scope},
    prelude::*,
    search::{KINDS, words},
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search_post, search_get))
}

const SORTS: [&str; 5] = ["_score", "updated_at:desc", "updated_at:asc", "title:asc", "title:desc"];
const MAX_SIZE: i64 = 100;
const MAX_FROM: i64 = 10_000;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SearchHit)]
struct Hit {
    /// `contact`, `lead`, `content_item` or `incident`.
    kind: String,
    /// The resource's id (`contact_id`, `lead_id`, `item_id`, `incident_id`).
    id: String,
    title: String,
    /// Relevance, higher first (BM25 on SQLite, `ts_rank` on PostgreSQL:
    /// comparable within one answer only).
    score: f64,
    updated_at: String,
}

/// The order of the hits.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[schema(as = SearchSort)]
enum Sort {
    #[serde(rename = "_score")]
    Score,
    #[serde(rename = "updated_at:desc")]
    UpdatedDesc,
    #[serde(rename = "updated_at:asc")]
    UpdatedAsc,
    #[serde(rename = "title:asc")]
    TitleAsc,
    #[serde(rename = "title:desc")]
    TitleDesc,
}

impl Sort {
    fn as_str(self) -> &'static str {
        SORTS[self as usize]
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SearchRequest)]
struct Dsl {
    /// The words to find; every one must match.
    #[schema(max_length = 500)]
    query: String,
    /// 10 when absent.
    #[schema(minimum = 1, maximum = 100)]
    size: Option<i64>,
    /// Hits to pass over; 0 when absent.
    #[schema(minimum = 0, maximum = 10_000)]
    from: Option<i64>,
    /// `_score` when absent.
    sort: Option<Sort>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SearchQuery {
    /// The words to find (as `query`).
    q: Option<String>,
    /// As `size`.
    size: Option<String>,
    /// As `from`.
    from: Option<String>,
    /// As `sort`.
    sort: Option<String>,
}

/// A search, checked.
struct Search {
    words: Vec<String>,
    size: i64,
    from: i64,
    sort: String,
}

fn checked(check: &mut Check, field: &str, query: &Option<String>, size: Option<Value>, from: Option<Value>, sort: &Option<String>) -> Search {
    let text = check.required(field, query);
    if text.chars().count() > 500 {
        check.fail(format!("{field} must be at most 500 characters"));
    }
    let found = words(&text);
    if !text.is_empty() && found.is_empty() {
        check.fail(format!("{field} must contain a word (letters or digits)"));
    }
    let size = check.optional_int("size", size.as_ref(), 1, MAX_SIZE).unwrap_or(10);
    let from = check.optional_int("from", from.as_ref(), 0, MAX_FROM).unwrap_or(0);
    let sort = Check::optional(sort).unwrap_or_else(|| "_score".into());
    check.one_of("sort", &sort, &SORTS);
    Search { words: found, size, from, sort }
}

/// A query string number as JSON, so both forms share one check
/// (unparsable text stays a string and fails it).
fn number(v: &Option<String>) -> Option<Value> {
    let v = v.as_deref().map(str::trim).filter(|s| !s.is_empty())?;
    Some(v.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::from(v)))
}

/// Searches the tenant's resources the caller may read (the DSL form).
#[utoipa::path(post, path = "/api/search", tag = "sdk-search", request_body = Dsl,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": { "query": "race" } }))),
    responses((status = 200, description = "one page of hits, with the count of all", body = ListOf<Hit>)))]
async fn search_post(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Dsl>) -> ApiResult<Response> {
    let body = body.checked()?;
    let found = words(body.query.trim());
    if found.is_empty() {
        return Err(ApiError::Validation(vec!["query must contain a word (letters or digits)".into()]));
    }
    let sort = body.sort.map_or("_score", Sort::as_str).to_string();
    run(&state, &ctx, Search { words: found, size: body.size.unwrap_or(10), from: body.from.unwrap_or(0), sort }).await
}

/// Searches the tenant's resources the caller may read (the query form).
#[utoipa::path(get, path = "/api/search", tag = "sdk-search", params(SearchQuery),
    responses((status = 200, description = "one page of hits, with the count of all", body = ListOf<Hit>)))]
async fn search_get(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SearchQuery>) -> ApiResult<Response> {
    let mut check = Check::new();
    let search = checked(&mut check, "q", &q.q, number(&q.size), number(&q.from), &q.sort);
    check.finish()?;
    run(&state, &ctx, search).await
}

/// The kinds the caller may read: a machine by its scopes, a person by
/// the permissions of their persona's roles (as the gate decides routes).
async fn readable(state: &AppState, ctx: &TenantCtx) -> ApiResult<Vec<&'static str>> {
    let held = match &ctx.key_scopes {
        Some(scopes) => scopes.clone(),
        None => keys::permissions(state, &ctx.persona_id).await?,
    };
    Ok(KINDS.iter().filter(|(_, needed)| scope::any_covers(&held, needed)).map(|(kind, _)| *kind).collect())
}

async fn run(state: &AppState, ctx: &TenantCtx, search: Search) -> ApiResult<Response> {
    let kinds = readable(state, ctx).await?;
    if kinds.is_empty() {
        return Ok(list(Vec::<Hit>::new(), 0));
    }
    let sqlite = state.db.backend == db::Backend::Sqlite;
    let (from, matches, score, q) = if sqlite {
        let q = search.words.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" ");
        // CROSS JOIN keeps the full-text index the outer loop: SQLite's
        // planner otherwise may walk the tenant's documents by the unique
        // (tenant, kind, ref) index and probe the index once per document.
        ("search_fts CROSS JOIN search_document d ON d.doc_id = search_fts.rowid", "search_fts MATCH $1", "-bm25(search_fts, 10.0, 1.0)", q)
    } else {
        (
            "search_document d",
            "d.tsv @@ to_tsquery('simple', $1)",
            "CAST(ts_rank(d.tsv, to_tsquery('simple', $1)) AS DOUBLE PRECISION)",
            search.words.join(" & "),
        )
    };
    let in_kinds = db::placeholders(3, kinds.len());
    let filter = format!("{matches} AND d.tenant_id = $2 AND d.kind IN ({in_kinds})");
    let order = match search.sort.as_str() {
        "updated_at:desc" => "d.updated_at DESC, d.doc_id DESC",
        "updated_at:asc" => "d.updated_at ASC, d.doc_id ASC",
        "title:asc" => "d.title ASC, d.doc_id ASC",
        "title:desc" => "d.title DESC, d.doc_id DESC",
        _ => "score DESC, d.doc_id DESC",
    };
    let (l, o) = (kinds.len() + 3, kinds.len() + 4);
    let count_sql = format!("SELECT COUNT(*) FROM {from} WHERE {filter}");
    let rows_sql = format!(
        "SELECT d.kind AS kind, d.ref_id AS id, d.title AS title, {score} AS score, d.updated_at AS updated_at FROM {from} WHERE {filter} \
         ORDER BY {order} LIMIT ${l} OFFSET ${o}"
    );
    let mut count = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(count_sql)).bind(&q).bind(&ctx.tenant_id);
    let mut rows = sqlx::query_as::<_, Hit>(sqlx::AssertSqlSafe(rows_sql)).bind(&q).bind(&ctx.tenant_id);
    for k in &kinds {
        count = count.bind(*k);
        rows = rows.bind(*k);
    }
    let total = count.fetch_one(&state.db.read).await?;
    let hits = rows.bind(search.size).bind(search.from).fetch_all(&state.db.read).await?;
    Ok(list(hits, total))
}
