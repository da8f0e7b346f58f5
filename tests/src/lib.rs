//! Shared helpers of the end-to-end tests and the benchmark.
