//! Benchmarks of `tiered-timer` and `tiered-timer-redis` against their
//! peers; not published.
//!
//! The peers (tokio's timers, tokio-util's `DelayQueue`, pingora-timeout,
//! futures-timer, async-io, tokio-io-timeout, apalis-redis, RSMQ) are
//! dependencies of this crate only, so the published crates' examples stay
//! tutorials and build none of them.
//!
//! ```sh
//! cargo run --release -p tiered-timer-benchmarks --example compare              # the timer
//! cargo run --release -p tiered-timer-benchmarks --example compare_delay_queue  # DelayQueue
//! cargo run --release -p tiered-timer-benchmarks --example peers                # Redis queues
//! cargo run --release -p tiered-timer-benchmarks --example bench                # Redis: the poller
//! cargo run --release -p tiered-timer-benchmarks --example ops_cost             # Redis: operator reads
//! cargo bench -p tiered-timer-benchmarks                                        # criterion, HTML in target/criterion
//! cargo test -p tiered-timer-benchmarks                                         # tests run against a peer
//! ```
//!
//! Each program's own documentation says what it measures and how. This
//! library holds what several of them share.

pub mod redis_support;

mod process_cpu;
pub use process_cpu::process_cpu;
