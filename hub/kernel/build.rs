//! The migrations are embedded at compile time (`sqlx::migrate!`): rebuild
//! the kernel whenever a migration file is added, renamed or changed.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations/sqlite");
    println!("cargo:rerun-if-changed=../../migrations/postgres");
}
