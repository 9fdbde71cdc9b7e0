//! tiered-timer
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms, unreachable_pub)]
#[allow(dead_code)]
mod wheel;
