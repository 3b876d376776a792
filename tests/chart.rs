//! The benchmark charts (`benches/support/chart.rs`), drawn to files and read back: benchmarks run
//! them only in `make bench`, so `make test` checks them here.

#[path = "../benches/support/chart.rs"]
mod chart;
