//! The decisions of sdk-assignment, free of I/O: a rule set routing a
//! subject, the gates and strategies of assign-by-task, and the replay of
//! a simulation. The handlers read the inputs, call these, and store what
//! they answer.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use hub_kernel::{stored_enum, validate::Check};

use crate::dispatch::{Point, haversine};

stored_enum! {
    /// What a decision came to: given to a persona a rule qualified
    /// (`ASSIGNED`), to the least loaded candidate when no rule could
    /// (`FALLBACK`), sent to a person (`REVIEW`), or given to no one
    /// (`UNROUTABLE`).
    #[schema(as = AssignmentOutcome)]
    pub enum Outcome { Assigned = "ASSIGNED", Fallback = "FALLBACK", Review = "REVIEW", Unroutable = "UNROUTABLE" }
}

stored_enum! {
    /// How a winner is picked among the candidates that pass the gates.
    #[schema(as = AssignmentStrategy)]
    pub enum Strategy { Default = "default", RoundRobin = "round_robin", FairShare = "fair_share" }
}

/// Rules a rule set holds at most.
pub const MAX_RULES: usize = 100;

/// One rule of a rule set: when every `when` condition holds for the
/// subject, `assign` hands it to a candidate with `specialty` (any
/// candidate when absent), and `review` sends it to a person.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: String,
    when: Map<String, Value>,
    specialty: Option<String>,
    review: bool,
}

impl Rule {
    /// `when`: each key names a field of the subject, its value the value
    /// the field must have, or an array of the values it may have.
    fn matches(&self, subject: &Value) -> bool {
        self.when.iter().all(|(field, want)| {
            let have = subject.get(field).unwrap_or(&Value::Null);
            match want {
                Value::Array(any) => any.contains(have),
                one => one == have,
            }
        })
    }
}

/// Reads a rule set's `rules`, reporting each problem by index.
pub fn parse_rules(check: &mut Check, value: Option<&Value>) -> Vec<Rule> {
    let Some(Value::Array(items)) = value else {
        check.fail("rules must be a non-empty array");
        return Vec::new();
    };
    if items.is_empty() || items.len() > MAX_RULES {
        check.fail(format!("rules must hold 1 to {MAX_RULES} rules"));
    }
    let mut rules = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("rules[{i}]");
        let Some(obj) = item.as_object() else {
            check.fail(format!("{at} must be an object"));
            continue;
        };
        let name = obj.get("name").and_then(Value::as_str).map(str::trim).unwrap_or_default();
        if name.is_empty() || name.len() > 128 {
            check.fail(format!("{at}.name must be a string of 1 to 128 characters"));
        }
        let when = match obj.get("when") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => {
                check.fail(format!("{at}.when must be an object"));
                Map::new()
            }
        };
        let specialty = match obj.get("specialty") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(_) => {
                check.fail(format!("{at}.specialty must be a non-blank string"));
                None
            }
        };
        let review = match obj.get("action").map(|a| a.as_str()) {
            None | Some(Some("assign")) => false,
            Some(Some("review")) => true,
            Some(_) => {
                check.fail(format!("{at}.action must be one of: assign, review"));
                false
            }
        };
        rules.push(Rule { name: name.to_string(), when, specialty, review });
    }
    rules
}

/// What routing a subject decided.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routed {
    pub outcome: Outcome,
    pub persona_id: Option<String>,
    pub matched_rule: Option<String>,
}

/// Routes a subject through `rules`, first match first:
/// - a matching `review` rule: `REVIEW`;
/// - a matching `assign` rule with a qualified candidate: `ASSIGNED` to
///   the least loaded of them (then the order given);
/// - no rule could assign, but there are candidates: `FALLBACK` to the
///   least loaded candidate;
/// - no candidates: `UNROUTABLE`.
///
/// `load` counts what each persona was given today (absent: none).
pub fn route(rules: &[Rule], subject: &Value, candidates: &[String], specialties: &Specialties, load: &HashMap<String, i64>) -> Routed {
    let least_loaded = |pool: Vec<&String>| pool.into_iter().min_by_key(|p| load.get(*p).copied().unwrap_or(0)).cloned();
    for rule in rules.iter().filter(|r| r.matches(subject)) {
        if rule.review {
            return Routed { outcome: Outcome::Review, persona_id: None, matched_rule: Some(rule.name.clone()) };
        }
        let qualified: Vec<&String> =
            candidates.iter().filter(|c| rule.specialty.as_ref().is_none_or(|s| specialties.get(*c).is_some_and(|have| have.contains(s)))).collect();
        if let Some(winner) = least_loaded(qualified) {
            return Routed { outcome: Outcome::Assigned, persona_id: Some(winner), matched_rule: Some(rule.name.clone()) };
        }
    }
    match least_loaded(candidates.iter().collect()) {
        Some(p) => Routed { outcome: Outcome::Fallback, persona_id: Some(p), matched_rule: None },
        None => Routed { outcome: Outcome::Unroutable, persona_id: None, matched_rule: None },
    }
}

/// A persona's workload as assign-by-task reads it.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub skills: Vec<String>,
    pub available_from: Option<DateTime<Utc>>,
    pub available_to: Option<DateTime<Utc>>,
    pub capacity_per_day: Option<i64>,
    pub location: Option<Point>,
}

/// A candidate of assign-by-task: its workload (none recorded: no skills,
/// always available, no capacity limit) and what it was given today.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub persona_id: String,
    pub workload: Option<Workload>,
    pub assigned_today: i64,
}

/// How one candidate fared: the gate that stopped it, or eligible.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[schema(as = AssignmentEvaluation)]
pub struct Evaluation {
    pub persona_id: String,
    pub eligible: bool,
    /// `skills`, `availability` or `capacity`; null when eligible.
    pub gate: Option<&'static str>,
    /// Great-circle km to the task, when both locations are known.
    pub distance_km: Option<f64>,
}

/// The gates, in order: every required skill held, `now` inside the
/// availability window, and capacity left today.
fn gate(c: &Candidate, required: &[String], now: DateTime<Utc>) -> Option<&'static str> {
    let w = c.workload.clone().unwrap_or_default();
    if !required.iter().all(|s| w.skills.contains(s)) {
        return Some("skills");
    }
    if w.available_from.is_some_and(|f| now < f) || w.available_to.is_some_and(|t| now >= t) {
        return Some("availability");
    }
    if w.capacity_per_day.is_some_and(|cap| c.assigned_today >= cap) {
        return Some("capacity");
    }
    None
}

fn capacity_left(c: &Candidate) -> i64 {
    c.workload.as_ref().and_then(|w| w.capacity_per_day).map_or(i64::MAX, |cap| cap - c.assigned_today)
}

/// Assign-by-task: the gates first, then the strategy picks among the
/// eligible candidates.
/// - `default`: the primary (first candidate given), then the backup
///   (second), then the others; within a rank the nearest to the task,
///   then the most capacity left.
/// - `round_robin`: the first eligible persona after `cursor` in
///   persona id order, wrapping around: every member of a pool gets a
///   turn before anyone gets a second.
/// - `fair_share`: the fewest assignments today, then the most capacity
///   left, then persona id.
pub fn assign(
    candidates: &[Candidate],
    required: &[String],
    strategy: Strategy,
    location: Option<Point>,
    cursor: Option<&str>,
    now: DateTime<Utc>,
) -> (Option<String>, Vec<Evaluation>) {
    let evaluations: Vec<Evaluation> = candidates
        .iter()
        .map(|c| {
            let gate = gate(c, required, now);
            let distance_km = location.zip(c.workload.as_ref().and_then(|w| w.location)).map(|(a, b)| (haversine(a, b) * 1000.0).round() / 1000.0);
            Evaluation { persona_id: c.persona_id.clone(), eligible: gate.is_none(), gate, distance_km }
        })
        .collect();
    let eligible: Vec<(usize, &Candidate)> = candidates.iter().enumerate().filter(|(i, _)| evaluations[*i].eligible).collect();
    let winner = match strategy {
        Strategy::RoundRobin => {
            let mut ids: Vec<&str> = eligible.iter().map(|(_, c)| c.persona_id.as_str()).collect();
            ids.sort_unstable();
            ids.iter().find(|id| cursor.is_some_and(|last| **id > last)).or(ids.first()).map(|id| id.to_string())
        }
        Strategy::FairShare => eligible
            .iter()
            .min_by(|(_, a), (_, b)| {
                (a.assigned_today, std::cmp::Reverse(capacity_left(a)), &a.persona_id).cmp(&(
                    b.assigned_today,
                    std::cmp::Reverse(capacity_left(b)),
                    &b.persona_id,
                ))
            })
            .map(|(_, c)| c.persona_id.clone()),
        Strategy::Default => eligible
            .iter()
            .min_by(|(i, a), (j, b)| {
                let rank = |i: usize| i.min(2);
                let km = |i: usize| evaluations[i].distance_km.unwrap_or(f64::INFINITY);
                rank(*i).cmp(&rank(*j)).then(km(*i).total_cmp(&km(*j))).then(capacity_left(b).cmp(&capacity_left(a)))
            })
            .map(|(_, c)| c.persona_id.clone()),
    };
    (winner, evaluations)
}

/// Persona id to the specialties it holds.
pub type Specialties = HashMap<String, Vec<String>>;

/// A recorded routing decision, replayed by a simulation.
pub struct Recorded {
    pub subject: Value,
    pub candidates: Vec<String>,
    pub specialties: Specialties,
    pub outcome: Outcome,
    pub persona_id: Option<String>,
}

/// What a simulation found.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
#[schema(as = AssignmentSimulationReport)]
pub struct Report {
    /// Recorded decisions replayed.
    pub replayed: usize,
    /// Count per outcome under the candidate version.
    pub outcomes: BTreeMap<String, usize>,
    /// Subjects each persona of the pool would be given.
    pub per_persona: BTreeMap<String, usize>,
    /// Decisions whose outcome or persona would differ from the recorded.
    pub changed: usize,
    /// (most given − least given) / all given, over the pool's personas;
    /// 0 when nothing was given.
    pub skew: f64,
    pub skew_tolerance: f64,
    pub within_tolerance: bool,
}

/// Replays `recorded` through `rules`, oldest first, with the load
/// building up as it would have. `pool` (candidates and specialties)
/// replaces each decision's own when given.
pub fn simulate(rules: &[Rule], recorded: &[Recorded], pool: Option<(&[String], &Specialties)>, skew_tolerance: f64) -> Report {
    let mut load: HashMap<String, i64> = HashMap::new();
    let mut outcomes: BTreeMap<String, usize> = Outcome::ALL.iter().map(|o| (o.as_str().to_string(), 0)).collect();
    let mut per_persona: BTreeMap<String, usize> = BTreeMap::new();
    let mut changed = 0;
    for r in recorded {
        let (candidates, specialties) = pool.unwrap_or((&r.candidates, &r.specialties));
        for c in candidates {
            per_persona.entry(c.clone()).or_insert(0);
        }
        let routed = route(rules, &r.subject, candidates, specialties, &load);
        if let Some(p) = &routed.persona_id {
            *load.entry(p.clone()).or_insert(0) += 1;
            *per_persona.entry(p.clone()).or_insert(0) += 1;
        }
        *outcomes.entry(routed.outcome.as_str().to_string()).or_insert(0) += 1;
        if routed.outcome != r.outcome || routed.persona_id != r.persona_id {
            changed += 1;
        }
    }
    let given: usize = per_persona.values().sum();
    let skew = match (per_persona.values().max(), per_persona.values().min()) {
        (Some(max), Some(min)) if given > 0 => ((max - min) as f64 / given as f64 * 1e4).round() / 1e4,
        _ => 0.0,
    };
    Report { replayed: recorded.len(), outcomes, per_persona, changed, skew, skew_tolerance, within_tolerance: skew <= skew_tolerance }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(v: Value) -> Vec<Rule> {
        let mut check = Check::new();
        let rules = parse_rules(&mut check, Some(&v));
        check.finish().expect("valid rules");
        rules
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_first_matching_rule_decides_and_load_spreads_the_work() {
        let r = rules(json!([
            { "name": "vip", "when": { "tier": "gold" }, "action": "review" },
            { "name": "cardio", "when": { "kind": ["heart", "lungs"] }, "specialty": "cardio" },
        ]));
        let specialties: HashMap<String, Vec<String>> = [("b".to_string(), vec!["cardio".to_string()]), ("c".to_string(), vec!["cardio".to_string()])].into();
        let cands = ids(&["a", "b", "c"]);
        let none = HashMap::new();
        assert_eq!(route(&r, &json!({ "tier": "gold", "kind": "heart" }), &cands, &specialties, &none).outcome, Outcome::Review);
        let routed = route(&r, &json!({ "kind": "lungs" }), &cands, &specialties, &none);
        assert_eq!((routed.outcome, routed.persona_id.as_deref(), routed.matched_rule.as_deref()), (Outcome::Assigned, Some("b"), Some("cardio")));
        let busy_b = [("b".to_string(), 3)].into();
        assert_eq!(route(&r, &json!({ "kind": "heart" }), &cands, &specialties, &busy_b).persona_id.as_deref(), Some("c"));
        // No rule can assign: the least loaded candidate, as a fallback.
        let routed = route(&r, &json!({ "kind": "skin" }), &cands, &specialties, &busy_b);
        assert_eq!((routed.outcome, routed.persona_id.as_deref()), (Outcome::Fallback, Some("a")));
        assert_eq!(route(&r, &json!({ "kind": "heart" }), &[], &specialties, &none).outcome, Outcome::Unroutable);
    }

    #[test]
    fn rules_are_checked_by_index() {
        let mut check = Check::new();
        parse_rules(&mut check, Some(&json!([{ "name": "" }, 3, { "name": "x", "when": 1, "action": "drop", "specialty": 2 }])));
        let Err(hub_kernel::error::ApiError::Validation(problems)) = check.finish() else { panic!("refused") };
        assert_eq!(
            problems,
            [
                "rules[0].name must be a string of 1 to 128 characters",
                "rules[1] must be an object",
                "rules[2].when must be an object",
                "rules[2].specialty must be a non-blank string",
                "rules[2].action must be one of: assign, review",
            ]
        );
    }

    fn candidate(id: &str, skills: &[&str], cap: Option<i64>, today: i64, at: Option<(f64, f64)>) -> Candidate {
        let workload = Workload { skills: ids(skills), capacity_per_day: cap, location: at.map(|(lat, lng)| Point { lat, lng }), ..Default::default() };
        Candidate { persona_id: id.to_string(), workload: Some(workload), assigned_today: today }
    }

    #[test]
    fn the_gates_run_before_any_strategy() {
        let now = Utc::now();
        let mut away = candidate("d", &["x"], None, 0, None);
        away.workload.as_mut().unwrap().available_from = Some(now + chrono::TimeDelta::hours(1));
        let cands = [candidate("a", &["y"], None, 0, None), candidate("b", &["x"], Some(2), 2, None), candidate("c", &["x", "y"], None, 0, None), away];
        for &strategy in Strategy::ALL {
            let (winner, ev) = assign(&cands, &ids(&["x"]), strategy, None, None, now);
            assert_eq!(winner.as_deref(), Some("c"), "{strategy}");
            let gates: Vec<_> = ev.iter().map(|e| e.gate).collect();
            assert_eq!(gates, [Some("skills"), Some("capacity"), None, Some("availability")]);
        }
        let (winner, _) = assign(&cands[..2], &ids(&["x"]), Strategy::Default, None, None, now);
        assert_eq!(winner, None);
    }

    #[test]
    fn default_prefers_the_primary_then_the_backup_then_the_nearest_then_capacity() {
        let now = Utc::now();
        let task = Some(Point { lat: 52.37, lng: 4.89 });
        let skilled = |id: &str, at: (f64, f64)| candidate(id, &["x"], None, 0, Some(at));
        let cands = [skilled("p", (40.0, -3.0)), skilled("b", (52.0, 4.0)), skilled("far", (48.0, 2.0)), skilled("near", (52.38, 4.9))];
        let x = ids(&["x"]);
        assert_eq!(assign(&cands, &x, Strategy::Default, task, None, now).0.as_deref(), Some("p"), "the primary, however far");
        assert_eq!(assign(&cands[1..], &x, Strategy::Default, task, None, now).0.as_deref(), Some("b"), "the backup next");
        // Primary and backup unqualified: the nearest of the others.
        let mut rest = cands.to_vec();
        rest[0].workload.as_mut().unwrap().skills.clear();
        rest[1].workload.as_mut().unwrap().skills.clear();
        let (winner, ev) = assign(&rest, &x, Strategy::Default, task, None, now);
        assert_eq!(winner.as_deref(), Some("near"), "{ev:?}");
        assert!(ev[3].distance_km.unwrap() < 2.0 && ev[2].distance_km.unwrap() > 400.0, "{ev:?}");
        // Same rank, no distance: the most capacity left.
        let tied = [rest[0].clone(), rest[1].clone(), candidate("busy", &["x"], Some(5), 4, None), candidate("free", &["x"], Some(5), 1, None)];
        assert_eq!(assign(&tied, &x, Strategy::Default, None, None, now).0.as_deref(), Some("free"));
    }

    #[test]
    fn round_robin_gives_everyone_a_turn_and_fair_share_the_least_busy() {
        let now = Utc::now();
        let cands = [candidate("c", &[], None, 0, None), candidate("a", &[], None, 5, None), candidate("b", &[], None, 1, None)];
        let mut cursor: Option<String> = None;
        let mut turns = Vec::new();
        for _ in 0..4 {
            let (w, _) = assign(&cands, &[], Strategy::RoundRobin, None, cursor.as_deref(), now);
            turns.push(w.clone().unwrap());
            cursor = w;
        }
        assert_eq!(turns, ["a", "b", "c", "a"]);
        assert_eq!(assign(&cands, &[], Strategy::FairShare, None, None, now).0.as_deref(), Some("c"));
    }

    #[test]
    fn a_simulation_reports_the_spread_and_what_changed() {
        let r = rules(json!([{ "name": "all" }]));
        let spec = HashMap::new();
        let recorded: Vec<Recorded> = (0..4)
            .map(|_| Recorded {
                subject: json!({}),
                candidates: ids(&["a", "b"]),
                specialties: spec.clone(),
                outcome: Outcome::Assigned,
                persona_id: Some("a".into()),
            })
            .collect();
        let report = simulate(&r, &recorded, None, 0.1);
        assert_eq!((report.replayed, report.changed, report.skew, report.within_tolerance), (4, 2, 0.0, true));
        assert_eq!(report.per_persona, [("a".to_string(), 2), ("b".to_string(), 2)].into());
        let pool = ids(&["a", "b", "c"]);
        let report = simulate(&r, &recorded, Some((&pool, &spec)), 0.1);
        assert_eq!((report.skew, report.within_tolerance), (0.25, false), "{report:?}");
        assert_eq!(report.outcomes["ASSIGNED"], 4);
    }
}
