//! Workload 2: reset-heavy idle guards. 10 000 registered sleeps, each
//! pushed later and re-polled `--reset-rounds` (50) times, in rounds over
//! all of them, as an idle connection's deadline is on every event; ns per
//! reset + poll. pingora's sleeps cannot be reset.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use tiered_timer_benchmarks::runtime;
use tiered_timer_benchmarks::timers::Imp;

use crate::{Args, Unit, Workload};

const RESET_SLEEPS: usize = 10_000;
/// Every sleep's first deadline.
const BASE: Duration = Duration::from_secs(10);

pub fn workload(args: &Args) -> Workload {
    let args = args.clone();
    Workload {
        id: "2",
        key: "reset",
        name: "reset-heavy idle guard: 10 000 sleeps pushed later 50 times",
        metrics: vec![("per reset + poll", Unit::Ns)],
        runs: args.runs,
        run: Box::new(move |imp| reset_later(imp, &args)),
    }
}

fn reset_later(imp: Imp, args: &Args) -> Option<Vec<f64>> {
    let rt = runtime::multi_thread(args.workers);
    let _in_rt = rt.enter();
    let rounds = args.reset_rounds;
    let took = match imp {
        Imp::Ours => {
            let sleeps = (0..RESET_SLEEPS)
                .map(|_| tiered_timer::sleep(BASE))
                .collect();
            resets(sleeps, rounds, |s, at, _| Pin::new(s).reset(at.into()))
        }
        Imp::Tokio => {
            let sleeps = (0..RESET_SLEEPS)
                .map(|_| Box::pin(tokio::time::sleep(BASE)))
                .collect();
            resets(sleeps, rounds, |s, at, _| s.as_mut().reset(at.into()))
        }
        Imp::Pingora | Imp::TokioAlt => return None,
        Imp::FuturesTimer => {
            let sleeps = (0..RESET_SLEEPS)
                .map(|_| futures_timer::Delay::new(BASE))
                .collect();
            // A relative reset: the delay from now.
            resets(sleeps, rounds, |s, _, later| s.reset(later))
        }
        Imp::AsyncIo => {
            let sleeps = (0..RESET_SLEEPS)
                .map(|_| async_io::Timer::after(BASE))
                .collect();
            resets(sleeps, rounds, |s, at, _| {
                s.set_at(at);
            })
        }
    };
    let ops = f64::from(rounds) * RESET_SLEEPS as f64;
    Some(vec![took.as_nanos() as f64 / ops])
}

/// Polls every sleep once (registering it), then for each of `rounds`
/// rounds resets every sleep with `reset` to a deadline 1 ms later than the
/// last round's (given as an instant, and as a delay from the start of the
/// rounds), and polls it again; returns the time the rounds took.
fn resets<S: Future + Unpin>(
    mut sleeps: Vec<S>,
    rounds: u32,
    reset: impl Fn(&mut S, Instant, Duration),
) -> Duration {
    let mut cx = Context::from_waker(Waker::noop());
    for s in &mut sleeps {
        assert!(Pin::new(s).poll(&mut cx).is_pending());
    }
    // After the sleeps are made: every reset is to a later deadline (making
    // 10 000 sleeps can take longer than one round's 1 ms).
    let origin = Instant::now();
    for round in 1..=rounds {
        let later = BASE + Duration::from_millis(u64::from(round));
        let deadline = origin + later;
        for s in &mut sleeps {
            reset(s, deadline, later);
            black_box(Pin::new(s).poll(&mut cx).is_pending());
        }
    }
    origin.elapsed()
}
