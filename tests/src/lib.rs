//! Shared code of the end-to-end tests and the benchmarks (see `src/bin`).
