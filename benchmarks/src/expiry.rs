//! Sleeps that expire, and how late: the workloads `compare` (3, 7) and
//! `lock_quota` (`mass`, `blocked`) share, and the 1 ms ticker `lock_quota`
//! runs beside them. Each returns the lateness of every sleep in ns: the
//! instant the woken task runs minus the deadline it asked for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::timers::{sleep_until, Imp};

/// Tasks of the mass expiry.
pub const MASS_TASKS: usize = 200_000;

/// Mass expiry: [`MASS_TASKS`] tasks each sleeping 1..=1000 ms (spread
/// evenly, shuffled over the spawn order) from its first poll, on the
/// current runtime. Returns each sleep's lateness in ns.
///
/// # Panics
///
/// If a task panics.
pub async fn mass_expiry(imp: Imp) -> Vec<u64> {
    let handles: Vec<_> = (0..MASS_TASKS)
        .map(|i| {
            let d = Duration::from_millis(1 + (i as u64 * 7919) % 1000);
            tokio::spawn(async move {
                let deadline = Instant::now() + d;
                sleep_until(imp, deadline).await;
                Instant::now().duration_since(deadline).as_nanos() as u64
            })
        })
        .collect();
    let mut late = Vec::with_capacity(MASS_TASKS);
    for h in handles {
        late.push(h.await.unwrap());
    }
    late
}

/// Sleepers of the blocked worker.
pub const BLOCKED_SLEEPERS: u64 = 1000;
/// How often a CPU-bound request arrives.
pub const BLOCKED_EVERY: Duration = Duration::from_millis(250);
/// How long each request spins on its worker.
pub const BLOCKED_FOR: Duration = Duration::from_millis(100);

/// The blocked worker's requests: a thread that, until `stop`, spawns on
/// `runtime` every [`BLOCKED_EVERY`] a task spinning for [`BLOCKED_FOR`]
/// (from outside the runtime, so whichever worker picks it up runs it).
pub fn cpu_bound_requests(
    runtime: tokio::runtime::Handle,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut k = 1;
        while !stop.load(Ordering::Relaxed) {
            let next = start + BLOCKED_EVERY * k;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            k += 1;
            drop(runtime.spawn(async {
                let until = Instant::now() + BLOCKED_FOR;
                while Instant::now() < until {
                    std::hint::spin_loop();
                }
            }));
        }
    })
}

/// The blocked worker's sleepers: [`BLOCKED_SLEEPERS`] tasks on the current
/// runtime, each sleeping 5..54 ms in turn ([`sleep_lengths`]) until
/// `length` has passed (run [`cpu_bound_requests`] beside them). Returns
/// every sleep's lateness in ns.
///
/// # Panics
///
/// If a task panics.
pub async fn blocked_sleepers(imp: Imp, length: Duration) -> Vec<u64> {
    let end = Instant::now() + length;
    let handles: Vec<_> = (0..BLOCKED_SLEEPERS)
        .map(|i| {
            tokio::spawn(async move {
                let mut late = Vec::new();
                let mut lengths = sleep_lengths(i);
                while Instant::now() < end {
                    let length = lengths.next().expect("an endless sequence");
                    let deadline = Instant::now() + length;
                    sleep_until(imp, deadline).await;
                    late.push(Instant::now().duration_since(deadline).as_nanos() as u64);
                }
                late
            })
        })
        .collect();
    let mut late = Vec::new();
    for h in handles {
        late.extend(h.await.unwrap());
    }
    late
}

/// The lengths blocked sleeper `i` sleeps, in turn, for ever: 5..54 ms,
/// spread by a multiplicative step (`n -> 31 n + 7`, wrapping), the same
/// sequence in every run.
pub fn sleep_lengths(i: u64) -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(i), |n| Some(n.wrapping_mul(31).wrapping_add(7)))
        .skip(1)
        .map(|n| Duration::from_millis(5 + n % 50))
}

/// A task on the current runtime sleeping with `imp` to each next 1 ms
/// boundary until `stop`, skipping ticks already missed (as
/// `MissedTickBehavior::Skip`); its result is each tick's lateness in ns.
pub fn ticker(imp: Imp, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let start = Instant::now();
        let mut late = Vec::new();
        let mut k = 0u64;
        while !stop.load(Ordering::Relaxed) {
            k += 1;
            let next = start + Duration::from_millis(k);
            sleep_until(imp, next).await;
            let now = Instant::now();
            late.push(now.duration_since(next).as_nanos() as u64);
            while start + Duration::from_millis(k + 1) < now {
                k += 1;
            }
        }
        late
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: compare's blocked worker stepped its sleepers' lengths
    /// with `n * 31 + 7`, which overflows after a dozen sleeps of a task: a
    /// debug build panicked ("attempt to multiply with overflow") a few
    /// hundred ms into workload 7.
    #[test]
    fn every_sleeper_has_lengths_for_ever() {
        for i in 0..BLOCKED_SLEEPERS {
            for length in sleep_lengths(i).take(10_000) {
                assert!((5..55).contains(&length.as_millis()), "{length:?}");
            }
        }
    }

    /// The lengths are those compare and lock_quota have always used.
    #[test]
    fn the_first_lengths_of_a_sleeper() {
        let ms: Vec<u128> = sleep_lengths(0).take(3).map(|d| d.as_millis()).collect();
        // n: 7, 224, 6951.
        assert_eq!(ms, [12, 29, 6]);
    }
}
