//! The catalogue, machine-readable: the OpenAPI document and the capability
//! index are public, describe every route the hub serves, and carry what
//! the gate decides (security, required scope, whether an operation writes).

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::Value;

use crate::{db_test, helpers::*};

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// (METHOD, path template) of every operation in the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

async fn the_capability_index_lists_every_group_and_api(app: TestApp) {
    let (_, doc) = app.get("/openapi.json", None).await;
    let (s, index) = app.get("/capabilities.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(index["version"], "2026.07.21");
    let apis = index["apis"].as_array().unwrap();
    assert_eq!(apis.len(), operations(&doc).len());
    let measure = apis.iter().find(|a| a["path"] == "/api/hdk/measure/measurements" && a["method"] == "POST").unwrap();
    assert_eq!(
        (measure["group"].as_str(), measure["required_scope"].as_str(), measure["writes"].as_bool()),
        (Some("hdk-measure"), Some("hdk.measure.write"), Some(true))
    );
    let group = index["groups"].as_array().unwrap().iter().find(|g| g["group"] == "hdk-measure").unwrap();
    assert_eq!(group["area"], "device");
}
db_test!(the_capability_index_lists_every_group_and_api);
