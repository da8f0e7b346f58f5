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

const MAX_SIZE: i64 = 100;
const MAX_FROM: i64 = 10_000;

stored_enum! {
    /// What kind of resource a hit is.
    #[schema(as = SearchHitKind)]
    pub enum HitKind { Contact = "contact", Lead = "lead", ContentItem = "content_item", Incident = "incident" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SearchHit)]
struct Hit {
    kind: HitKind,
    /// The resource's id (`contact_id`, `lead_id`, `item_id`, `incident_id`).
    id: String,
    title: String,
    /// Relevance, higher first (BM25 on SQLite, `ts_rank` on PostgreSQL:
    /// comparable within one answer only).
    score: f64,
    updated_at: Timestamp,
}

stored_enum! {
    /// The order of the hits.
    #[schema(as = SearchSort)]
    pub enum Sort {
        Score = "_score",
        UpdatedDesc = "updated_at:desc",
        UpdatedAsc = "updated_at:asc",
        TitleAsc = "title:asc",
        TitleDesc = "title:desc",
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
    #[param(max_length = 500)]
    q: String,
    /// As `size`: 10 when absent.
    #[param(minimum = 1, maximum = 100)]
    size: Option<i64>,
    /// As `from`: 0 when absent.
    #[param(minimum = 0, maximum = 10_000)]
    from: Option<i64>,
    /// As `sort`: `_score` when absent.
    #[param(inline)]
    sort: Option<Sort>,
}

/// A search, checked.
struct Search {
    words: Vec<String>,
    size: i64,
    from: i64,
    sort: Sort,
}

impl Search {
    /// The search of `text` (refused, naming `field`, when it holds no
    /// word); the page kept in its bounds.
    fn of(field: &str, text: &str, size: Option<i64>, from: Option<i64>, sort: Option<Sort>) -> ApiResult<Search> {
        let found = words(text.trim());
        if found.is_empty() {
            return Err(ApiError::Validation(vec![format!("{field} must contain a word (letters or digits)")]));
        }
        let size = size.unwrap_or(10).clamp(1, MAX_SIZE);
        let from = from.unwrap_or(0).clamp(0, MAX_FROM);
        Ok(Search { words: found, size, from, sort: sort.unwrap_or(Sort::Score) })
    }
}

/// Searches the tenant's resources the caller may read (the DSL form).
#[utoipa::path(post, path = "/api/search", tag = "sdk-search", request_body = Dsl,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": { "query": "race" } }))),
    responses((status = 200, description = "one page of hits, with the count of all", body = ListOf<Hit>)))]
async fn search_post(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Dsl>) -> ApiResult<ListOf<Hit>> {
    let body = body.checked()?;
    run(&state, &ctx, Search::of("query", &body.query, body.size, body.from, body.sort)?).await
}

/// Searches the tenant's resources the caller may read (the query form).
#[utoipa::path(get, path = "/api/search", tag = "sdk-search", params(SearchQuery),
    responses((status = 200, description = "one page of hits, with the count of all", body = ListOf<Hit>)))]
async fn search_get(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SearchQuery>) -> ApiResult<ListOf<Hit>> {
    run(&state, &ctx, Search::of("q", &q.q, q.size, q.from, q.sort)?).await
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

async fn run(state: &AppState, ctx: &TenantCtx, search: Search) -> ApiResult<ListOf<Hit>> {
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
    let order = match search.sort {
        Sort::UpdatedDesc => "d.updated_at DESC, d.doc_id DESC",
        Sort::UpdatedAsc => "d.updated_at ASC, d.doc_id ASC",
        Sort::TitleAsc => "d.title ASC, d.doc_id ASC",
        Sort::TitleDesc => "d.title DESC, d.doc_id DESC",
        Sort::Score => "score DESC, d.doc_id DESC",
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
