//! sdk-trace: signed exports of a trace. A trace is the tenant's agent
//! runs that carry one `trace_id`, with the audit entries (hash-chained)
//! that recorded them. An export writes that evidence as one artifact, JSON
//! or PDF, into the object store and signs its bytes with HMAC-SHA256 under
//! the tenant's trace key; whoever holds that key (`GET
//! /api/traces/verification-key`) can check an artifact.

mod pdf;

use axum::{
    http::{HeaderValue, header},
    response::IntoResponse,
};
use base64::{Engine, engine::general_purpose::STANDARD as B64};
use hub_kernel::{crypto::DataKey, prelude::*};
use object_store::{PutPayload, path::Path as ObjectPath};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export, list_exports)).routes(routes!(get_export)).routes(routes!(verification_key))
}

/// The runs one export carries at most (a trace is one task's runs).
const MAX_RUNS: usize = 10_000;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = TraceExport)]
struct Export {
    export_id: Id,
    trace_id: String,
    format: Format,
    status: ExportStatus,
    /// Where the artifact is kept in the object store.
    artifact_key: Option<String>,
    /// SHA-256 of the artifact's bytes, hex.
    sha256: Option<String>,
    /// HMAC-SHA256 of the artifact's bytes under the trace key `key_id`, hex.
    signature_hex: Option<String>,
    key_id: Option<String>,
    size_bytes: Option<i64>,
    requested_by: String,
    created_at: Timestamp,
    ready_at: Option<Timestamp>,
    /// The artifact itself, exactly the signed bytes (on a read of a JSON
    /// export; a PDF export's read answers the PDF itself).
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    artifact: Option<String>,
}

const COLUMNS: &str = "export_id, trace_id, format, status, artifact_key, sha256, signature_hex, key_id, size_bytes, requested_by, created_at, ready_at";

/// The tenant's trace key, made on first use (only then through the
/// writer: a read of an existing key takes no write lock).
async fn trace_key(state: &AppState, tenant_id: &str) -> ApiResult<DataKey> {
    const SELECT: &str = "SELECT key_id FROM trace_key WHERE tenant_id = $1";
    let existing: Option<String> = sqlx::query_scalar(SELECT).bind(tenant_id).fetch_optional(&state.db.read).await?;
    let key_id = match existing {
        Some(k) => k,
        None => {
            let mut tx = state.db.begin().await?;
            let key = DataKey::create(&mut tx, &state.master).await?;
            sqlx::query("INSERT INTO trace_key (tenant_id, key_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (tenant_id) DO NOTHING")
                .bind(tenant_id)
                .bind(&key.key_id)
                .bind(db::now())
                .execute(&mut *tx)
                .await?;
            let k = sqlx::query_scalar(SELECT).bind(tenant_id).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            k
        }
    };
    DataKey::load(&state.db.read, &state.master, &key_id).await?.ok_or_else(|| ApiError::Conflict("the tenant's trace key was destroyed".into()))
}

stored_enum! {
    /// The form of an artifact: `json` (platform.trace-export.v1) or `pdf`
    /// (the same evidence as text on A4 pages).
    #[schema(as = TraceExportFormat)]
    enum Format { Json = "json", Pdf = "pdf" }
}

stored_enum! {
    /// Where an export is: `requested`, then `ready` or `failed`.
    #[schema(as = TraceExportStatus)]
    enum ExportStatus { Requested = "requested", Ready = "ready", Failed = "failed" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewTraceExport)]
struct NewExport {
    /// `json` when absent.
    format: Option<Format>,
}

/// Exports a trace as a signed artifact (404 when the tenant has no run
/// of that trace).
#[utoipa::path(post, path = "/api/traces/{trace_id}/exports", tag = "sdk-trace", request_body = NewExport,
    params(("trace_id" = String, Path, description = "the trace")),
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 16, "given": [["POST", "/api/agent-runtime/agents", {"name": "Racer", "acting_persona_id": "{persona_id}", "tier": "gold", "vector_namespace": "races", "created_by": "races"}], ["POST", "/api/agent-runtime/runs", {"agent_id": "{agent_id}", "persona_id": "{owner_persona_id}", "trace_id": "t-{unique}", "actor_id": "races", "actor_kind": "human"}], ["GET", "/api/traces/verification-key", null]], "body": {}}))),
    responses((status = 201, description = "the export, ready", body = Data<Export>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn export(State(state): State<AppState>, Tenant(ctx): Tenant, Path(trace_id): Path<String>, body: Body<NewExport>) -> ApiResult<Created<Export>> {
    let runs = hub_ai::agent_runtime::runs_of_trace(&state.db.read, &ctx.tenant_id, &trace_id).await?;
    if runs.is_empty() {
        return Err(ApiError::NotFound);
    }
    let format = body.checked()?.format.unwrap_or(Format::Json);
    if runs.len() > MAX_RUNS {
        return Err(ApiError::invalid(format!("the trace has more than {MAX_RUNS} runs: too large to export at once")));
    }
    let key = trace_key(&state, &ctx.tenant_id).await?;
    let (export_id, now) = (db::new_id(), db::now());
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO trace_export (export_id, tenant_id, trace_id, format, status, requested_by, created_at) VALUES ($1, $2, $3, $4, 'requested', $5, $6)",
    )
    .bind(&export_id)
    .bind(&ctx.tenant_id)
    .bind(&trace_id)
    .bind(format)
    .bind(audit::actor_of(&ctx).1)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    audit::record(&mut tx, &ctx, events::TRACE_EXPORT_REQUESTED, json!({ "export_id": export_id, "trace_id": trace_id, "format": format })).await?;
    tx.commit().await?;

    // The evidence: the runs, and the audit entries that recorded them.
    let entry_ids: Vec<String> = runs.iter().filter_map(|r| r["audit_entry_id"].as_str().map(str::to_string)).collect();
    let entries = audit::entries_by_id(&state.db.read, &ctx.tenant_id, &entry_ids).await?;
    let counts = (runs.len(), entries.len());
    // Signed alike whatever the form: HMAC-SHA256 of the artifact's exact bytes.
    let bytes = match format {
        Format::Json => {
            let artifact = json!({
                "format": "platform.trace-export.v1", "export_id": export_id, "tenant_id": ctx.tenant_id, "trace_id": trace_id,
                "generated_at": now, "runs": runs, "audit_entries": entries,
            });
            serde_json::to_vec(&artifact).map_err(|e| ApiError::Internal(e.into()))?
        }
        Format::Pdf => {
            // Up to 10,000 runs is thousands of pages: laid out off the request threads.
            let (export_id, tenant_id, trace_id) = (export_id.clone(), ctx.tenant_id.clone(), trace_id.clone());
            tokio::task::spawn_blocking(move || {
                let header = pdf::Header { export_id: &export_id, tenant_id: &tenant_id, trace_id: &trace_id, generated_at: &now };
                pdf::render(&header, &runs, &entries)
            })
            .await
            .map_err(|e| ApiError::Internal(e.into()))?
        }
    };
    let (sha256, signature) = (hub_kernel::crypto::sha256_hex(&bytes), hex::encode(key.mac(&bytes)));
    let artifact_key = format!("traces/{}/{export_id}.{}", ctx.tenant_id, format.as_str());
    let size = bytes.len() as i64;
    let stored = state.media.put(&ObjectPath::from(artifact_key.as_str()), PutPayload::from(bytes)).await;
    let mut tx = state.db.begin().await?;
    if let Err(e) = stored {
        sqlx::query("UPDATE trace_export SET status = 'failed' WHERE export_id = $1").bind(&export_id).execute(&mut *tx).await?;
        tx.commit().await?;
        return Err(hub_kernel::storage::failure(e, "storing the trace artifact"));
    }
    let sql = format!(
        "UPDATE trace_export SET status = 'ready', artifact_key = $2, sha256 = $3, signature_hex = $4, key_id = $5, size_bytes = $6, ready_at = $7 \
         WHERE export_id = $1 RETURNING {COLUMNS}"
    );
    let done: Export = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&export_id)
        .bind(&artifact_key)
        .bind(&sha256)
        .bind(&signature)
        .bind(&key.key_id)
        .bind(size)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload =
        json!({ "export_id": export_id, "trace_id": trace_id, "artifact_key": artifact_key, "sha256": sha256, "runs": counts.0, "audit_entries": counts.1 });
    audit::record(&mut tx, &ctx, events::TRACE_EXPORT_READY, payload).await?;
    tx.commit().await?;
    Ok(created(done))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportFilter {
    #[param(inline)]
    status: Option<ExportStatus>,
}

/// The exports of a trace, newest first (without their artifacts: read
/// one for it). A trace the tenant has neither runs nor exports of is 404.
#[utoipa::path(get, path = "/api/traces/{trace_id}/exports", tag = "sdk-trace", params(("trace_id" = String, Path, description = "the trace"), ExportFilter, Page),
    responses((status = 200, description = "one page of the trace's exports", body = ListOf<Export>)))]
async fn list_exports(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(trace_id): Path<String>,
    Params(q): Params<ExportFilter>,
    page: Page,
) -> ApiResult<ListOf<Export>> {
    let status = q.status.map_or("", ExportStatus::as_str);
    let listing = Listing {
        table: "trace_export",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND trace_id = $2 AND ($3 = '' OR status = $3)",
        order: "created_at DESC, export_id DESC",
    };
    let exports = page.list::<Export>(&state.db.read, &listing, &[&ctx.tenant_id, &trace_id, status]).await?;
    if exports.total == 0 {
        let any: Option<String> = sqlx::query_scalar("SELECT export_id FROM trace_export WHERE tenant_id = $1 AND trace_id = $2 LIMIT 1")
            .bind(&ctx.tenant_id)
            .bind(&trace_id)
            .fetch_optional(&state.db.read)
            .await?;
        if any.is_none() && hub_ai::agent_runtime::runs_of_trace(&state.db.read, &ctx.tenant_id, &trace_id).await?.is_empty() {
            return Err(ApiError::NotFound);
        }
    }
    Ok(exports)
}

/// A PDF export's artifact in the document: the file's bytes (never built:
/// the read answers the stored bytes as they are).
#[derive(ToSchema)]
#[schema(as = TraceExportPdf, value_type = String, format = Binary)]
#[allow(dead_code)]
struct PdfFile(Vec<u8>);

/// An export with its signed artifact: a JSON export answers the export
/// with `artifact`, the signed text; a ready PDF export answers the PDF
/// itself. Either carries the signature in headers too.
#[utoipa::path(get, path = "/api/traces/exports/{export_id}", tag = "sdk-trace", params(("export_id" = String, Path, description = "the export")),
    responses((status = 200, description = "a JSON export (and one not ready): the export and, once ready, its artifact; a ready PDF export: the PDF, exactly the signed bytes",
            content((Data<Export> = "application/json"), (PdfFile = "application/pdf")),
            headers(("x-trace-export-id" = String, description = "the export (once ready)"),
                ("x-trace-sha256" = String, description = "SHA-256 of the artifact's bytes, hex (once ready)"),
                ("x-trace-signature-hex" = String, description = "HMAC-SHA256 of the artifact's bytes under the trace key x-trace-key-id, hex (once ready)"),
                ("x-trace-key-id" = String, description = "the trace key that signed the artifact (once ready)"))),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn get_export(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM trace_export WHERE tenant_id = $1 AND export_id = $2");
    let mut export: Export =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?.ok_or(ApiError::NotFound)?;
    let Some(key) = &export.artifact_key else { return Ok(ok(export).into_response()) };
    let unread = |e| hub_kernel::storage::failure(e, "reading the trace artifact");
    let bytes = state.media.get(&ObjectPath::from(key.as_str())).await.map_err(unread)?.bytes().await.map_err(unread)?;
    let signed = [
        ("x-trace-export-id", Some(export.export_id.to_string())),
        ("x-trace-sha256", export.sha256.clone()),
        ("x-trace-signature-hex", export.signature_hex.clone()),
        ("x-trace-key-id", export.key_id.clone()),
    ];
    let mut res = match export.format {
        Format::Json => {
            export.artifact = Some(String::from_utf8(bytes.to_vec()).map_err(|e| ApiError::Internal(e.into()))?);
            ok(export).into_response()
        }
        Format::Pdf => {
            let mut res = bytes.into_response();
            let h = res.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/pdf"));
            let attachment = HeaderValue::from_str(&format!("attachment; filename=\"trace-export-{id}.pdf\"")).map_err(|e| ApiError::Internal(e.into()))?;
            h.insert(header::CONTENT_DISPOSITION, attachment);
            h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
            res
        }
    };
    for (name, value) in signed {
        if let Some(value) = value {
            res.headers_mut().insert(name, HeaderValue::from_str(&value).map_err(|e| ApiError::Internal(e.into()))?);
        }
    }
    Ok(res)
}

/// The key that checks an artifact's signature.
#[derive(Serialize, ToSchema)]
#[schema(as = TraceVerificationKey)]
struct VerificationKey {
    key_id: String,
    /// `HMAC-SHA256`.
    algorithm: &'static str,
    /// The 32-byte key, base64.
    key_b64: String,
}

/// The tenant's trace key, with which an artifact's `signature_hex` is
/// checked (HMAC-SHA256 over the artifact's bytes).
#[utoipa::path(get, path = "/api/traces/verification-key", tag = "sdk-trace",
    responses((status = 200, description = "the key", body = Data<VerificationKey>)))]
async fn verification_key(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Data<VerificationKey>> {
    let key = trace_key(&state, &ctx.tenant_id).await?;
    Ok(ok(VerificationKey { key_b64: B64.encode(key.reveal()), key_id: key.key_id.clone(), algorithm: "HMAC-SHA256" }))
}
