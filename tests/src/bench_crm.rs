//! The CRM benchmark's scenarios (the `crm-bench` binary), on SQLite and, with
//! `--postgres-url`, on PostgreSQL: a write-heavy mix (create a contact,
//! log two calls, one missed, each with its audit events in the same
//! transaction, then read the contact's timeline), and list latency, with
//! each list's filters, over `--tenant-rows` contacts, calls and leads in
//! the caller's tenant and `--other-rows` in ten other tenants, seeded with
//! bulk SQL.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use super::{MakeRequest, Outcome, run};

/// What the CRM scenarios need of the command line.
#[derive(Clone, Copy)]
pub struct CrmArgs {
    pub seconds: u64,
    pub concurrency: usize,
    pub list_concurrency: usize,
    pub tenant_rows: u64,
    pub other_rows: u64,
    pub server_threads: usize,
}

/// Runs the scenarios on one database; prints and returns the outcomes.
pub fn bench(label: &str, database_url: Option<String>, args: CrmArgs) -> anyhow::Result<Vec<Outcome>> {
    let dir = tempfile::tempdir()?;
    let server_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(args.server_threads).enable_all().build()?;
    let mut config = hub_kernel::config::Config::for_tests(dir.path().into(), database_url);
    config.listen = "127.0.0.1:0".parse()?;
    let server = server_rt.block_on(async {
        let state = hub::prepare(config).await?;
        hub::start(state).await
    })?;
    let state = server.state.clone();
    let base = format!("http://{}", server.addr);
    println!("\n== CRM on {label}: hub on {base}, {} server threads", args.server_threads);

    let client_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let outcomes = client_rt.block_on(async move {
        let client = reqwest::Client::builder().pool_max_idle_per_host(args.concurrency * 2).build()?;
        let signup = |n: usize| {
            let client = client.clone();
            let base = base.clone();
            async move {
                let s: Value = client
                    .post(format!("{base}/api/auth/signup-tenant"))
                    .json(&json!({ "email": format!("crm{n}@bench.example.com"), "password": "bench password", "org_name": format!("CRM {n}"),
                                   "app_id": format!("crm-bench-{n}"), "display_name": "Bench", "region": "eu-west-1" }))
                    .send()
                    .await?
                    .json()
                    .await?;
                anyhow::Ok(s["data"].clone())
            }
        };
        let me = signup(0).await?;
        let jwt = me["token"].as_str().context("signup token")?.to_string();
        let tenant = me["tenant_id"].as_str().context("tenant")?.to_string();
        let persona = me["persona_id"].as_str().context("persona")?.to_string();

        // The write mix, on the fresh database.
        let mix = write_mix(&client, &base, &jwt, args.concurrency, args.seconds).await?;

        // Seed: the caller's tenant and ten others, contacts and calls.
        let mut others = Vec::new();
        for n in 1..=10 {
            others.push(signup(n).await?["tenant_id"].as_str().context("tenant")?.to_string());
        }
        let started = Instant::now();
        seed(&state.db, &tenant, Some(&persona), 0, args.tenant_rows).await?;
        let per_other = args.other_rows / others.len() as u64;
        for (i, other) in others.iter().enumerate() {
            seed(&state.db, other, None, args.tenant_rows + i as u64 * per_other, per_other).await?;
        }
        analyze(&state.db).await?;
        println!(
            "seeded {} contacts, calls and leads in the caller's tenant, {} of each in 10 others, in {:.1}s (bulk SQL)",
            args.tenant_rows,
            per_other * others.len() as u64,
            started.elapsed().as_secs_f64()
        );
        let busy = seeded_id(0);
        plans(&state.db, &tenant, &busy).await?;

        let url = |p: &str| format!("{base}{p}");
        let get = |path: String| -> MakeRequest {
            let (u, t) = (url(&path), jwt.clone());
            Arc::new(move |c| c.get(&u).bearer_auth(&t))
        };
        for (path, want) in [("/api/crm/contacts?limit=1".to_string(), args.tenant_rows + mix.contacts)] {
            let r = client.get(url(&path)).bearer_auth(&jwt).send().await?;
            let body: Value = r.json().await?;
            ensure!(body["total"].as_u64() == Some(want), "{path}: total {} (expected {want})", body["total"]);
        }
        let mut out = mix.outcomes;
        let lists = [
            ("GET /api/crm/contacts", get("/api/crm/contacts".into())),
            ("GET /api/crm/contacts?owner_persona_id", get(format!("/api/crm/contacts?owner_persona_id={persona}"))),
            ("GET /api/crm/contacts?company", get("/api/crm/contacts?company=Company%207".into())),
            ("GET /api/crm/contacts?email", get("/api/crm/contacts?email=nobody%40bench.example.com".into())),
            ("GET /api/crm/leads", get("/api/crm/leads".into())),
            ("GET /api/crm/leads?status", get("/api/crm/leads?status=qualified".into())),
            ("GET /api/crm/leads?owner_persona_id", get(format!("/api/crm/leads?owner_persona_id={persona}"))),
            ("GET /api/crm/leads?source", get("/api/crm/leads?source=Source%207".into())),
            ("GET /api/crm/leads?contact_id", get(format!("/api/crm/leads?contact_id={busy}"))),
            ("GET /api/crm/calls", get("/api/crm/calls".into())),
            ("GET /api/crm/calls?disposition", get("/api/crm/calls?disposition=no_answer".into())),
            ("GET /api/crm/calls?direction", get("/api/crm/calls?direction=inbound".into())),
            ("GET /api/crm/calls?contact_id", get(format!("/api/crm/calls?contact_id={busy}"))),
            ("GET /api/crm/contacts/{id}", get(format!("/api/crm/contacts/{busy}"))),
            ("GET /api/crm/contacts/{id}/timeline", get(format!("/api/crm/contacts/{busy}/timeline"))),
        ];
        for (name, make) in lists {
            out.push(run(name, &client, make, args.list_concurrency, args.seconds, 200).await);
        }
        anyhow::Ok(out)
    })?;
    println!("\n{:<40} {:>10} {:>9} {:>9} {:>9} {:>7}", "scenario", "per s", "p50 ms", "p99 ms", "max ms", "errors");
    for o in &outcomes {
        println!("{:<40} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>7}", o.name, o.rate(), o.percentile(0.50), o.percentile(0.99), o.percentile(1.0), o.errors);
    }
    server_rt.block_on(server.stop())?;
    Ok(outcomes)
}

struct Mix {
    outcomes: Vec<Outcome>,
    contacts: u64,
}

/// Each client: create a contact, log an answered and a missed call
/// (`crm.call.logged.v1` twice, `crm.call.missed.v1` once), read the
/// contact's timeline; again until the time is up.
async fn write_mix(client: &reqwest::Client, base: &str, jwt: &str, concurrency: usize, seconds: u64) -> anyhow::Result<Mix> {
    let stop = Arc::new(AtomicBool::new(false));
    let contacts = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (client, base, jwt, stop, contacts) = (client.clone(), base.to_string(), jwt.to_string(), stop.clone(), contacts.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat: [Vec<u64>; 3] = Default::default();
            let mut errors = 0u64;
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let t = Instant::now();
                let res = client.post(format!("{base}/api/crm/contacts")).bearer_auth(&jwt).json(&json!({ "name": format!("w{worker}-{n}") })).send().await;
                let Ok(res) = res else {
                    errors += 1;
                    continue;
                };
                if res.status() != 201 {
                    errors += 1;
                    continue;
                }
                let body: Value = res.json().await.unwrap_or_default();
                lat[0].push(t.elapsed().as_micros() as u64);
                contacts.fetch_add(1, Ordering::Relaxed);
                let id = body["data"]["contact_id"].as_str().unwrap_or_default().to_string();
                for disposition in ["answered", "no_answer"] {
                    let t = Instant::now();
                    let call = json!({ "contact_id": id, "direction": "outbound", "disposition": disposition, "duration_seconds": 30 });
                    match client.post(format!("{base}/api/crm/calls")).bearer_auth(&jwt).json(&call).send().await {
                        Ok(r) if r.status() == 201 => {
                            let _ = r.bytes().await;
                            lat[1].push(t.elapsed().as_micros() as u64);
                        }
                        _ => errors += 1,
                    }
                }
                let t = Instant::now();
                match client.get(format!("{base}/api/crm/contacts/{id}/timeline")).bearer_auth(&jwt).send().await {
                    Ok(r) if r.status() == 200 => {
                        let _ = r.bytes().await;
                        lat[2].push(t.elapsed().as_micros() as u64);
                    }
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all: [Vec<u64>; 3] = Default::default();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.context("a client task")?;
        for (a, l) in all.iter_mut().zip(lat) {
            a.extend(l);
        }
        errors += e;
    }
    let secs = started.elapsed().as_secs_f64();
    let names = ["mix: POST /api/crm/contacts", "mix: POST /api/crm/calls (+events)", "mix: GET …/timeline"];
    let mut outcomes = Vec::new();
    let total: usize = all.iter().map(Vec::len).sum();
    for (i, (name, mut lat)) in names.into_iter().zip(all).enumerate() {
        lat.sort_unstable();
        outcomes.push(Outcome { name, requests: lat.len() as u64, errors: if i == 0 { errors } else { 0 }, seconds: secs, latencies_us: lat });
    }
    println!("write mix: {:.0} requests/s over {concurrency} clients ({total} requests, {errors} errors)", total as f64 / secs);
    Ok(Mix { outcomes, contacts: contacts.load(Ordering::Relaxed) })
}

/// The id of the `n`th seeded row (contacts and calls alike: the tables differ).
fn seeded_id(n: u64) -> String {
    format!("00000000-0000-7000-8000-{n:012}")
}

/// Inserts `rows` contacts, `rows` calls and `rows` leads for `tenant` in one
/// statement each: row `n` (from `first`) is contact `seeded_id(n)`, a tenth
/// of them owned by `owner`; the calls go to the tenant's first thousand
/// contacts (a fifth missed: no answer, a fifth busy; a quarter inbound);
/// lead `n` is contact `n`'s, in one of the four statuses by turn, from one
/// of twenty sources.
async fn seed(db: &hub_kernel::db::Db, tenant: &str, owner: Option<&str>, first: u64, rows: u64) -> anyhow::Result<()> {
    let (last, hot) = (first + rows, first + rows.min(1000));
    let (contacts, calls, leads) = match db.backend {
        hub_kernel::db::Backend::Sqlite => (
            "WITH RECURSIVE s(n) AS (SELECT $3 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < $4) \
             INSERT INTO crm_contact (contact_id, tenant_id, name, emails, phones, company, owner_persona_id, attributes, created_by, created_at, updated_at) \
             SELECT printf('00000000-0000-7000-8000-%012d', n), $1, 'Seeded ' || n, '[]', '[]', 'Company ' || (n % 50), \
             CASE WHEN n % 10 = 0 THEN $2 END, '{}', 'bench', printf('2025-01-01T00:00:00.%06dZ', n % 1000000), '2025-01-01T00:00:00.000000Z' FROM s",
            "WITH RECURSIVE s(n) AS (SELECT $2 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < $3) \
             INSERT INTO crm_call (call_id, tenant_id, contact_id, direction, disposition, duration_seconds, recording_consent, occurred_at, logged_by, created_at) \
             SELECT printf('00000000-0000-7000-9000-%012d', n), $1, printf('00000000-0000-7000-8000-%012d', $2 + n % ($4 - $2)), \
             CASE WHEN n % 4 = 0 THEN 'inbound' ELSE 'outbound' END, CASE n % 5 WHEN 0 THEN 'no_answer' WHEN 1 THEN 'busy' ELSE 'answered' END, 60, 0, \
             printf('2025-02-01T00:00:00.%06dZ', n % 1000000), 'bench', printf('2025-02-01T00:00:00.%06dZ', n % 1000000) FROM s",
            "WITH RECURSIVE s(n) AS (SELECT $3 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < $4) \
             INSERT INTO crm_lead (lead_id, tenant_id, contact_id, name, company, source, status, owner_persona_id, attributes, created_by, created_at) \
             SELECT printf('00000000-0000-7000-a000-%012d', n), $1, printf('00000000-0000-7000-8000-%012d', n), 'Lead ' || n, 'Company ' || (n % 50), \
             'Source ' || (n % 20), CASE n % 4 WHEN 0 THEN 'new' WHEN 1 THEN 'contacted' WHEN 2 THEN 'qualified' ELSE 'unqualified' END, \
             CASE WHEN n % 10 = 0 THEN $2 END, '{}', 'bench', printf('2025-03-01T00:00:00.%06dZ', n % 1000000) FROM s",
        ),
        hub_kernel::db::Backend::Postgres => (
            "INSERT INTO crm_contact (contact_id, tenant_id, name, emails, phones, company, owner_persona_id, attributes, created_by, created_at, updated_at) \
             SELECT '00000000-0000-7000-8000-' || lpad(n::text, 12, '0'), $1, 'Seeded ' || n, '[]', '[]', 'Company ' || (n % 50), \
             CASE WHEN n % 10 = 0 THEN $2::text END, '{}', 'bench', '2025-01-01T00:00:00.' || lpad((n % 1000000)::text, 6, '0') || 'Z', \
             '2025-01-01T00:00:00.000000Z' FROM generate_series($3::bigint, $4::bigint - 1) AS n",
            "INSERT INTO crm_call (call_id, tenant_id, contact_id, direction, disposition, duration_seconds, recording_consent, occurred_at, logged_by, created_at) \
             SELECT '00000000-0000-7000-9000-' || lpad(n::text, 12, '0'), $1, '00000000-0000-7000-8000-' || lpad(($2::bigint + n % ($4::bigint - $2::bigint))::text, 12, '0'), \
             CASE WHEN n % 4 = 0 THEN 'inbound' ELSE 'outbound' END, CASE n % 5 WHEN 0 THEN 'no_answer' WHEN 1 THEN 'busy' ELSE 'answered' END, 60, 0, \
             '2025-02-01T00:00:00.' || lpad((n % 1000000)::text, 6, '0') || 'Z', 'bench', '2025-02-01T00:00:00.' || lpad((n % 1000000)::text, 6, '0') || 'Z' \
             FROM generate_series($2::bigint, $3::bigint - 1) AS n",
            "INSERT INTO crm_lead (lead_id, tenant_id, contact_id, name, company, source, status, owner_persona_id, attributes, created_by, created_at) \
             SELECT '00000000-0000-7000-a000-' || lpad(n::text, 12, '0'), $1, '00000000-0000-7000-8000-' || lpad(n::text, 12, '0'), 'Lead ' || n, \
             'Company ' || (n % 50), 'Source ' || (n % 20), CASE n % 4 WHEN 0 THEN 'new' WHEN 1 THEN 'contacted' WHEN 2 THEN 'qualified' ELSE 'unqualified' END, \
             CASE WHEN n % 10 = 0 THEN $2::text END, '{}', 'bench', '2025-03-01T00:00:00.' || lpad((n % 1000000)::text, 6, '0') || 'Z' \
             FROM generate_series($3::bigint, $4::bigint - 1) AS n",
        ),
    };
    let mut tx = db.begin().await?;
    sqlx::query(sqlx::AssertSqlSafe(contacts))
        .bind(tenant)
        .bind(owner)
        .bind(first as i64)
        .bind(last as i64)
        .execute(&mut *tx)
        .await
        .context("seeding contacts")?;
    sqlx::query(sqlx::AssertSqlSafe(calls))
        .bind(tenant)
        .bind(first as i64)
        .bind(last as i64)
        .bind(hot as i64)
        .execute(&mut *tx)
        .await
        .context("seeding calls")?;
    sqlx::query(sqlx::AssertSqlSafe(leads)).bind(tenant).bind(owner).bind(first as i64).bind(last as i64).execute(&mut *tx).await.context("seeding leads")?;
    // The contact counts the writes keep (hub_kernel::db::counts), recounted.
    for (name, filter) in [
        ("'crm_contact'", "tenant_id = $1 GROUP BY tenant_id"),
        ("'crm_contact owner ' || owner_persona_id", "tenant_id = $1 AND owner_persona_id IS NOT NULL GROUP BY tenant_id, owner_persona_id"),
        ("'crm_contact company ' || company", "tenant_id = $1 AND company IS NOT NULL GROUP BY tenant_id, company"),
    ] {
        let recount = format!(
            "INSERT INTO list_count (tenant_id, name, n) SELECT tenant_id, {name}, COUNT(*) FROM crm_contact WHERE {filter} \
             ON CONFLICT (tenant_id, name) DO UPDATE SET n = excluded.n"
        );
        sqlx::query(sqlx::AssertSqlSafe(recount)).bind(tenant).execute(&mut *tx).await.context("recounting contacts")?;
    }
    tx.commit().await?;
    Ok(())
}

async fn analyze(db: &hub_kernel::db::Db) -> anyhow::Result<()> {
    sqlx::query("ANALYZE").execute(db.writer()).await?;
    Ok(())
}

/// Prints the query plans of the lists measured: each must search an index.
async fn plans(db: &hub_kernel::db::Db, tenant: &str, contact: &str) -> anyhow::Result<()> {
    let queries = [
        ("contacts, newest first", "SELECT contact_id FROM crm_contact WHERE tenant_id = $1 ORDER BY created_at DESC, contact_id DESC LIMIT 50"),
        (
            "contacts of an owner",
            "SELECT contact_id FROM crm_contact WHERE tenant_id = $1 AND owner_persona_id = $2 ORDER BY created_at DESC, contact_id DESC LIMIT 50",
        ),
        ("calls of a contact", "SELECT call_id FROM crm_call WHERE tenant_id = $1 AND contact_id = $2 ORDER BY created_at DESC, call_id DESC LIMIT 50"),
        ("calls, newest first", "SELECT call_id FROM crm_call WHERE tenant_id = $1 ORDER BY created_at DESC, call_id DESC LIMIT 50"),
        (
            "calls by disposition",
            "SELECT call_id FROM crm_call WHERE tenant_id = $1 AND disposition = 'no_answer' ORDER BY created_at DESC, call_id DESC LIMIT 50",
        ),
        ("count of calls", "SELECT COUNT(*) FROM crm_call WHERE tenant_id = $1"),
        ("leads, newest first", "SELECT lead_id FROM crm_lead WHERE tenant_id = $1 ORDER BY created_at DESC, lead_id DESC LIMIT 50"),
        ("leads by status", "SELECT lead_id FROM crm_lead WHERE tenant_id = $1 AND status = 'qualified' ORDER BY created_at DESC, lead_id DESC LIMIT 50"),
        ("count of leads by status", "SELECT COUNT(*) FROM crm_lead WHERE tenant_id = $1 AND status = 'qualified'"),
    ];
    let explain = match db.backend {
        hub_kernel::db::Backend::Sqlite => "EXPLAIN QUERY PLAN",
        hub_kernel::db::Backend::Postgres => "EXPLAIN",
    };
    for (what, sql) in queries {
        let q = format!("{explain} {sql}");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(q)).bind(tenant);
        if sql.contains("$2") {
            query = query.bind(contact);
        }
        let rows = query.fetch_all(&db.read).await?;
        let lines: Vec<String> = rows
            .iter()
            .map(|r| {
                use sqlx::Row;
                let i = r.columns().len() - 1;
                r.try_get::<String, _>(i).unwrap_or_default()
            })
            .collect();
        println!("plan of {what}: {}", lines.join(" | "));
    }
    Ok(())
}
