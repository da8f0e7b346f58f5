-- sdk-rebac: PostgreSQL runs the check's walk as a server-side function
-- (one round trip per check); SQLite, in process, runs the same walk in
-- Rust (hub/governance/src/rebac.rs). Nothing to change here: the file
-- keeps both backends' migrations numbered alike.
SELECT 1;
