-- Operator "On-prem installs": customer clusters running the platform,
-- the billing reports generated for them and the bundles they applied.
CREATE TABLE onprem_install (
    install_id        TEXT PRIMARY KEY,
    customer_id       TEXT NOT NULL,
    cluster_name      TEXT NOT NULL,
    k8s_distribution  TEXT NOT NULL,
    installed_version TEXT NOT NULL,
    air_gap_mode      TEXT NOT NULL,
    billing_mode      TEXT NOT NULL,
    registered_by     TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);

CREATE TABLE onprem_billing_report (
    report_id           TEXT PRIMARY KEY,
    install_id          TEXT NOT NULL REFERENCES onprem_install (install_id),
    period_start        TEXT NOT NULL,
    period_end          TEXT NOT NULL,
    artifact_local_path TEXT NOT NULL,
    generated_by        TEXT NOT NULL,
    generated_at        TEXT NOT NULL
);
CREATE INDEX onprem_billing_report_install ON onprem_billing_report (install_id, generated_at);

CREATE TABLE onprem_bundle (
    application_id     TEXT PRIMARY KEY,
    install_id         TEXT NOT NULL REFERENCES onprem_install (install_id),
    bundle_version     TEXT NOT NULL,
    signature_verified INTEGER NOT NULL,
    migrations_applied TEXT NOT NULL,
    applied_by         TEXT NOT NULL,
    applied_at         TEXT NOT NULL
);
CREATE INDEX onprem_bundle_install ON onprem_bundle (install_id, applied_at);
