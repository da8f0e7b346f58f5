//! sdk-dispatch: a dispatcher's stop order. The stops are ordered by
//! nearest neighbour from the start, then improved by 2-opt (reversing a
//! stretch of the route wherever that shortens it) on great-circle
//! (haversine) distances; drive times follow from the setting
//! `DISPATCH_AVG_SPEED_KMH`. Every optimised route is stored and read back
//! by id. The route is open: it ends at its last stop.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(optimize)).routes(routes!(list_routes)).routes(routes!(get_route))
}

/// Stops a request may hold at most.
pub const MAX_STOPS: usize = 250;
/// 2-opt passes over the route at most (a pass tries every reversal once;
/// routes of `MAX_STOPS` settle in far fewer).
const MAX_PASSES: usize = 100;
/// The mean Earth radius (IUGG), in km.
const EARTH_RADIUS_KM: f64 = 6371.0088;

/// A stored route.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DispatchRoute)]
struct Route {
    route_id: Id,
    /// The persona the route is for.
    persona_id: String,
    /// Where the route begins, when the request gave a start; otherwise it
    /// begins at its first stop (the first stop of the request).
    #[sqlx(rename = "start_point", try_from = "String")]
    #[schema(value_type = Option<Point>)]
    start: JsonText,
    /// The stops in the optimised order.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Stop>)]
    stops: JsonText,
    /// Great-circle length of the optimised route, km.
    total_km: f64,
    /// Length of the route in the order the stops were given, km.
    given_order_km: f64,
    /// Drive time of the whole route at `avg_speed_kmh`, minutes.
    drive_minutes: f64,
    /// Drive time plus every stop's service time, minutes.
    total_minutes: f64,
    /// The speed the drive times were computed with (`DISPATCH_AVG_SPEED_KMH`).
    avg_speed_kmh: f64,
    optimized_at: Timestamp,
}

const COLUMNS: &str = "route_id, persona_id, start_point, stops, total_km, given_order_km, drive_minutes, total_minutes, avg_speed_kmh, optimized_at";

/// A point on the globe, in degrees.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[schema(as = DispatchPoint)]
pub(crate) struct Point {
    pub lat: f64,
    pub lng: f64,
}

/// A stop of an optimised route.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DispatchStop)]
struct Stop {
    /// 1-based position in the optimised order.
    sequence: usize,
    /// 0-based position of the stop in the request.
    input_index: usize,
    stop_id: Option<String>,
    label: Option<String>,
    lat: f64,
    lng: f64,
    /// Great-circle distance from the previous point (the start or the
    /// previous stop), km; 0 for a route's first stop without a start.
    leg_km: f64,
    /// Drive time of that leg, minutes.
    leg_minutes: f64,
    /// Minutes from the start to the arrival here: the drive and service
    /// times of everything before.
    arrival_minutes: f64,
    service_minutes: f64,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = DispatchOptimizeRequest)]
struct OptimizeRequest {
    /// The persona the route is for (a driver of this tenant); the
    /// caller's own persona when absent.
    #[schema(format = "uuid")]
    persona_id: Option<String>,
    /// Where the route begins (a depot, the driver's position). Absent:
    /// it begins at the first stop given, which stays first.
    start: Option<NewPoint>,
    #[schema(min_items = 1, max_items = 250)]
    stops: Vec<NewStop>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = DispatchNewPoint)]
struct NewPoint {
    /// Degrees.
    #[schema(minimum = -90, maximum = 90)]
    lat: f64,
    /// Degrees.
    #[schema(minimum = -180, maximum = 180)]
    lng: f64,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = DispatchNewStop)]
struct NewStop {
    /// The client's reference for the stop, unique within the request.
    #[schema(max_length = 128)]
    stop_id: Option<String>,
    #[schema(max_length = 200)]
    label: Option<String>,
    /// Degrees.
    #[schema(minimum = -90, maximum = 90)]
    lat: f64,
    /// Degrees.
    #[schema(minimum = -180, maximum = 180)]
    lng: f64,
    /// Minutes spent at the stop; 0 when absent.
    #[schema(minimum = 0, maximum = 1440)]
    service_minutes: Option<f64>,
}

/// A stop as validated.
struct Given {
    stop_id: Option<String>,
    label: Option<String>,
    at: Point,
    service_minutes: f64,
}

/// The stops, each stop_id given once (what their schema cannot say).
fn check_stops(check: &mut Check, stops: Vec<NewStop>) -> Vec<Given> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(stops.len());
    for (i, s) in stops.into_iter().enumerate() {
        let stop_id = Check::optional(&s.stop_id);
        if let Some(id) = &stop_id
            && !seen.insert(id.clone())
        {
            check.fail(format!("stops[{i}].stop_id '{id}' is given more than once"));
        }
        let label = Check::optional(&s.label);
        out.push(Given { stop_id, label, at: Point { lat: s.lat, lng: s.lng }, service_minutes: s.service_minutes.unwrap_or(0.0) });
    }
    out
}

/// Great-circle distance, km.
pub(crate) fn haversine(a: Point, b: Point) -> f64 {
    let (p1, p2) = (a.lat.to_radians(), b.lat.to_radians());
    let (dp, dl) = (p2 - p1, (b.lng - a.lng).to_radians());
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * h.sqrt().min(1.0).asin()
}

/// The pairwise distances of `points`, row-major.
fn distances(points: &[Point]) -> Vec<f64> {
    let n = points.len();
    let mut d = vec![0.0; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let x = haversine(points[i], points[j]);
            d[i * n + j] = x;
            d[j * n + i] = x;
        }
    }
    d
}

/// The visiting order of `points` from `points[0]`, which stays first:
/// nearest neighbour (ties to the earlier point), then 2-opt reversals
/// until none shortens the open path (or `MAX_PASSES`).
fn order(points: &[Point]) -> Vec<usize> {
    let n = points.len();
    let d = distances(points);
    let dist = |a: usize, b: usize| d[a * n + b];
    let mut path = Vec::with_capacity(n);
    let mut visited = vec![false; n];
    let mut at = 0;
    path.push(0);
    visited[0] = true;
    for _ in 1..n {
        let next = (0..n).filter(|&j| !visited[j]).min_by(|&x, &y| dist(at, x).total_cmp(&dist(at, y))).expect("an unvisited point");
        visited[next] = true;
        path.push(next);
        at = next;
    }
    for _ in 0..MAX_PASSES {
        let mut improved = false;
        for i in 1..n.saturating_sub(1) {
            for j in i + 1..n {
                // Reversing path[i..=j] swaps the edges (i-1, i) and
                // (j, j+1) for (i-1, j) and (i, j+1); the last stop has no
                // edge after it.
                let (a, b, c) = (path[i - 1], path[i], path[j]);
                let mut delta = dist(a, c) - dist(a, b);
                if j + 1 < n {
                    let e = path[j + 1];
                    delta += dist(b, e) - dist(c, e);
                }
                if delta < -1e-9 {
                    path[i..=j].reverse();
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    path
}

/// Rounded to `places` decimals (metres for km, a hundredth of a minute).
fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// What an optimisation computes, ready to store.
struct Plan {
    stops: Vec<Stop>,
    total_km: f64,
    given_order_km: f64,
    drive_minutes: f64,
    total_minutes: f64,
}

fn plan(start: Option<Point>, given: Vec<Given>, speed_kmh: f64) -> Plan {
    let mut points: Vec<Point> = start.into_iter().collect();
    let offset = points.len();
    points.extend(given.iter().map(|g| g.at));
    let path = order(&points);
    let minutes = |km: f64| km / speed_kmh * 60.0;
    let length = |seq: &mut dyn Iterator<Item = Point>| {
        let pts: Vec<Point> = seq.collect();
        pts.windows(2).map(|w| haversine(w[0], w[1])).sum::<f64>()
    };
    let given_order_km = length(&mut points.iter().copied());
    let mut given: Vec<Option<Given>> = given.into_iter().map(Some).collect();
    let (mut total_km, mut clock, mut prev) = (0.0, 0.0, None::<Point>);
    let mut stops = Vec::with_capacity(given.len());
    for &p in &path {
        let here = points[p];
        let leg = prev.map_or(0.0, |q| haversine(q, here));
        total_km += leg;
        prev = Some(here);
        if p < offset {
            continue;
        }
        let g = given[p - offset].take().expect("each stop once");
        clock += minutes(leg);
        stops.push(Stop {
            sequence: stops.len() + 1,
            input_index: p - offset,
            stop_id: g.stop_id,
            label: g.label,
            lat: g.at.lat,
            lng: g.at.lng,
            leg_km: round(leg, 3),
            leg_minutes: round(minutes(leg), 2),
            arrival_minutes: round(clock, 2),
            service_minutes: g.service_minutes,
        });
        clock += g.service_minutes;
    }
    let drive_minutes = minutes(total_km);
    Plan {
        stops,
        total_km: round(total_km, 3),
        given_order_km: round(given_order_km, 3),
        drive_minutes: round(drive_minutes, 2),
        total_minutes: round(clock, 2),
    }
}

/// Orders the stops (nearest neighbour, then 2-opt), stores the route and
/// answers it.
#[utoipa::path(post, path = "/api/dispatch/routes/optimize", tag = "sdk-dispatch", request_body = OptimizeRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "body": { "stops": [{ "stop_id": "s1", "lat": 52.37, "lng": 4.89 }, { "stop_id": "s2", "lat": 52.38, "lng": 4.91 }, { "stop_id": "s3", "lat": 52.36, "lng": 4.9 }] } }))),
    responses((status = 201, description = "the optimised route, stored", body = Data<Route>)))]
async fn optimize(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<OptimizeRequest>) -> ApiResult<Created<Route>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let persona = check.optional_uuid("persona_id", &body.persona_id).map(|u| u.to_string());
    let start = body.start.map(|p| Point { lat: p.lat, lng: p.lng });
    let given = check_stops(&mut check, body.stops);
    check.finish()?;
    let persona = match persona {
        Some(p) if !hub_identity::personas::exists_in_tenant(&state.db.read, &ctx.tenant_id, &p).await? => {
            return Err(ApiError::invalid("persona_id names no persona of this tenant"));
        }
        Some(p) => p,
        None => ctx.persona_id.clone(),
    };
    let speed = state.config.dispatch_avg_speed_kmh;
    // Some milliseconds of arithmetic for the largest routes: off the
    // request workers.
    let plan = tokio::task::spawn_blocking(move || plan(start, given, speed)).await.map_err(|e| ApiError::Internal(e.into()))?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO dispatch_route (route_id, tenant_id, persona_id, start_point, stops, stop_count, total_km, given_order_km, drive_minutes, \
         total_minutes, avg_speed_kmh, created_by, optimized_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING {COLUMNS}"
    );
    let route: Route = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&persona)
        .bind(json!(start).to_string())
        .bind(json!(plan.stops).to_string())
        .bind(plan.stops.len() as i64)
        .bind(plan.total_km)
        .bind(plan.given_order_km)
        .bind(plan.drive_minutes)
        .bind(plan.total_minutes)
        .bind(speed)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    // Names the route, never its places (where people are is personal data).
    let fact = json!({ "route_id": route.route_id, "persona_id": persona, "stop_count": plan.stops.len(), "total_km": plan.total_km });
    audit::record(&mut tx, &ctx, events::DISPATCH_ROUTE_OPTIMIZED, fact).await?;
    tx.commit().await?;
    Ok(created(route))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RouteQuery {
    /// Only the routes of this persona (a driver).
    #[param(format = "uuid")]
    persona_id: Option<String>,
    /// Optimised at or after.
    #[param(format = DateTime)]
    from: Option<String>,
    /// Optimised before.
    #[param(format = DateTime)]
    to: Option<String>,
}

/// A page of the caller's tenant's optimised routes, latest first.
#[utoipa::path(get, path = "/api/dispatch/routes", tag = "sdk-dispatch", params(RouteQuery, Page),
    responses((status = 200, description = "a page of routes", body = ListOf<Route>)))]
async fn list_routes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RouteQuery>, page: Page) -> ApiResult<ListOf<Route>> {
    let mut check = Check::new();
    let from = check.optional_expiry("from", &q.from).unwrap_or_default();
    let to = check.optional_expiry("to", &q.to).unwrap_or_default();
    check.finish()?;
    let persona = canonical_uuid_opt(&q.persona_id).unwrap_or_default();
    let listing = Listing {
        table: "dispatch_route",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR persona_id = $2) AND ($3 = '' OR optimized_at >= $3) AND ($4 = '' OR optimized_at < $4)",
        order: "optimized_at DESC, route_id DESC",
    };
    page.list::<Route>(&state.db.read, &listing, &[&ctx.tenant_id, &persona, &from, &to]).await
}

/// One optimised route of the caller's tenant.
#[utoipa::path(get, path = "/api/dispatch/routes/{route_id}", tag = "sdk-dispatch", params(("route_id" = String, Path, description = "the route")),
    responses((status = 200, description = "the route", body = Data<Route>)))]
async fn get_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Route>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM dispatch_route WHERE tenant_id = $1 AND route_id = $2");
    let route: Route =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(route))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(lat: f64, lng: f64) -> Point {
        Point { lat, lng }
    }

    fn length(points: &[Point], path: &[usize]) -> f64 {
        path.windows(2).map(|w| haversine(points[w[0]], points[w[1]])).sum()
    }

    #[test]
    fn haversine_gives_known_distances() {
        // One degree of a meridian is about 111.195 km; Paris to London about 343.6 km.
        assert!((haversine(p(0.0, 0.0), p(1.0, 0.0)) - 111.195).abs() < 0.01);
        assert!((haversine(p(48.8566, 2.3522), p(51.5074, -0.1278)) - 343.56).abs() < 0.5);
        assert_eq!(haversine(p(10.0, 20.0), p(10.0, 20.0)), 0.0);
        // Antipodes: half the circumference, no NaN from rounding.
        assert!((haversine(p(0.0, 0.0), p(0.0, 180.0)) - std::f64::consts::PI * EARTH_RADIUS_KM).abs() < 1e-6);
    }

    #[test]
    fn stops_along_a_road_are_visited_in_road_order() {
        let points: Vec<Point> = [0.0, 0.05, 0.04, 0.01, 0.03, 0.02].iter().map(|&x| p(52.0, 4.0 + x)).collect();
        let path = order(&points);
        assert_eq!(path, vec![0, 3, 5, 4, 2, 1]);
    }

    #[test]
    fn two_opt_untangles_what_nearest_neighbour_crosses() {
        // Nearest neighbour from the corner walks into a crossing; 2-opt
        // must leave no reversal that shortens the path.
        let points = vec![p(0.0, 0.0), p(0.0, 0.1), p(0.1, 0.1), p(0.1, 0.0), p(0.05, 0.21), p(0.06, -0.1), p(0.2, 0.05)];
        let path = order(&points);
        let best = length(&points, &path);
        let n = points.len();
        for i in 1..n - 1 {
            for j in i + 1..n {
                let mut other = path.clone();
                other[i..=j].reverse();
                assert!(length(&points, &other) >= best - 1e-9, "reversing {i}..={j} would shorten {path:?}");
            }
        }
        let mut seen = path.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "every point once");
        assert_eq!(path[0], 0, "the start stays first");
    }

    #[test]
    fn a_plan_is_never_longer_than_the_given_order_and_times_follow_the_speed() {
        let given: Vec<Given> = (0..40)
            .map(|i| {
                let x = f64::from((i * 37) % 40);
                Given { stop_id: Some(format!("s{i}")), label: None, at: p(52.0 + x * 0.01, 4.0 + f64::from(i % 7) * 0.01), service_minutes: 5.0 }
            })
            .collect();
        let plan = plan(Some(p(52.2, 4.0)), given, 30.0);
        assert_eq!(plan.stops.len(), 40);
        assert!(plan.total_km <= plan.given_order_km);
        assert!((plan.drive_minutes - plan.total_km * 2.0).abs() < 0.01, "30 km/h is 2 minutes a km");
        assert!((plan.total_minutes - (plan.drive_minutes + 40.0 * 5.0)).abs() < 0.05, "drive time and every stop's service time");
        let legs: f64 = plan.stops.iter().map(|s| s.leg_km).sum();
        assert!((legs - plan.total_km).abs() < 0.01);
        assert!(plan.stops.windows(2).all(|w| w[1].arrival_minutes >= w[0].arrival_minutes + w[0].service_minutes - 0.01));
    }
}
