//! The timers compared: ours and its peers, behind one [`Imp`], with the
//! sleep each offers.
//!
//! - `ours`: `tiered_timer`'s default timer;
//! - `tokio`: `tokio::time`;
//! - `tokio-alt`: tokio's alternative, per-worker timer
//!   (`Builder::enable_alt_timer`), only in a build with
//!   `RUSTFLAGS="--cfg tokio_unstable"` and only on multi-thread runtimes
//!   (see [`runtime_for`]);
//! - `pingora`: pingora-timeout's `fast_sleep` / `fast_timeout` (10 ms
//!   buckets, a clock thread);
//! - `futures-timer`: `futures_timer::Delay` (its own timer thread);
//! - `async-io`: `async_io::Timer` (its own reactor thread).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A timer implementation; its name (`ours`, `tokio-alt`, ...) is how
/// command lines, child requests and table columns spell it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Imp {
    Ours,
    Tokio,
    /// tokio's per-worker timer: only in a `--cfg tokio_unstable` build.
    #[cfg_attr(not(tokio_unstable), value(skip))]
    TokioAlt,
    Pingora,
    FuturesTimer,
    AsyncIo,
}

impl Imp {
    /// Every implementation this build has, ours first.
    #[cfg(not(tokio_unstable))]
    pub const ALL: &[Imp] = &[
        Imp::Ours,
        Imp::Tokio,
        Imp::Pingora,
        Imp::FuturesTimer,
        Imp::AsyncIo,
    ];
    /// Every implementation this build has, ours first.
    #[cfg(tokio_unstable)]
    pub const ALL: &[Imp] = &[
        Imp::Ours,
        Imp::Tokio,
        Imp::TokioAlt,
        Imp::Pingora,
        Imp::FuturesTimer,
        Imp::AsyncIo,
    ];

    /// Its name, as in the tables.
    ///
    /// # Examples
    ///
    /// ```
    /// use tiered_timer_benchmarks::timers::Imp;
    ///
    /// assert_eq!(Imp::FuturesTimer.name(), "futures-timer");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Imp::Ours => "ours",
            Imp::Tokio => "tokio",
            Imp::TokioAlt => "tokio-alt",
            Imp::Pingora => "pingora",
            Imp::FuturesTimer => "futures-timer",
            Imp::AsyncIo => "async-io",
        }
    }

    /// Our default timer's driver wakeups so far, NaN for the peers (which
    /// have no such count). Call in the runtime's context.
    pub fn driver_wakeups(self) -> f64 {
        match self {
            Imp::Ours => tiered_timer::Handle::current().stats().wakeups as f64,
            _ => f64::NAN,
        }
    }
}

/// Sleeps until `deadline` with `imp`'s own sleep. Those without an
/// absolute deadline get the remaining duration at first poll.
pub async fn sleep_until(imp: Imp, deadline: Instant) {
    match imp {
        Imp::Ours => tiered_timer::sleep_until(deadline.into()).await,
        Imp::Tokio | Imp::TokioAlt => tokio::time::sleep_until(deadline.into()).await,
        Imp::Pingora => {
            pingora_timeout::fast_timeout::fast_sleep(
                deadline.saturating_duration_since(Instant::now()),
            )
            .await
        }
        Imp::FuturesTimer => {
            futures_timer::Delay::new(deadline.saturating_duration_since(Instant::now())).await
        }
        Imp::AsyncIo => {
            async_io::Timer::at(deadline).await;
        }
    }
}

/// A pinned, boxed sleep of `d` from `imp`, each at its own size (what a
/// pending timer costs, future included).
pub fn boxed_sleep(imp: Imp, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    match imp {
        Imp::Ours => Box::pin(tiered_timer::sleep(d)),
        Imp::Tokio | Imp::TokioAlt => Box::pin(tokio::time::sleep(d)),
        Imp::Pingora => Box::pin(pingora_timeout::fast_timeout::fast_sleep(d)),
        Imp::FuturesTimer => Box::pin(futures_timer::Delay::new(d)),
        Imp::AsyncIo => Box::pin(async move {
            async_io::Timer::after(d).await;
        }),
    }
}

/// The multi-thread runtime of `workers` workers a workload of `imp` runs
/// on: with tokio's alternative timer for [`Imp::TokioAlt`], the default
/// one otherwise (time driver only).
///
/// # Panics
///
/// For [`Imp::TokioAlt`] in a build without `--cfg tokio_unstable` (it is
/// not in [`Imp::ALL`] there), or if the runtime cannot be built.
#[track_caller]
pub fn runtime_for(imp: Imp, workers: usize) -> tokio::runtime::Runtime {
    if imp != Imp::TokioAlt {
        return crate::runtime::multi_thread(workers);
    }
    #[cfg(tokio_unstable)]
    {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_alt_timer()
            .build()
            .expect("a tokio runtime")
    }
    #[cfg(not(tokio_unstable))]
    unreachable!("tokio's alternative timer needs RUSTFLAGS=\"--cfg tokio_unstable\"")
}
