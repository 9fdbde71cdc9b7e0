//! Quick start: sleeps, a timeout and an interval on tiered-timer, with
//! what happened printed as it happens.
//!
//! Run with `cargo run --example quickstart`.

use std::time::Duration;

use tiered_timer::{interval, sleep, timeout, Instant, MissedTickBehavior, Timer};

#[tokio::main]
async fn main() {
    let start = Instant::now();
    let at = move || format!("{:>5.1} ms", start.elapsed().as_secs_f64() * 1e3);

    // 1. Sleeps: three concurrent sleeps, each woken no earlier than asked.
    let woke = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sleeps = [30u64, 10, 20].map(|ms| {
        let woke = woke.clone();
        tokio::spawn(async move {
            let asked = Instant::now();
            sleep(Duration::from_millis(ms)).await;
            let slept = asked.elapsed();
            assert!(slept >= Duration::from_millis(ms), "never early");
            woke.lock().unwrap().push((ms, slept));
        })
    });
    for handle in sleeps {
        handle.await.unwrap();
    }
    for (ms, slept) in woke.lock().unwrap().iter() {
        println!(
            "[{}] sleep({ms} ms) woke after {:.2} ms",
            at(),
            slept.as_secs_f64() * 1e3
        );
    }

    // 2. A timeout: a slow operation is cut off, a fast one gets through.
    let slow = sleep(Duration::from_millis(200));
    match timeout(Duration::from_millis(50), slow).await {
        Ok(()) => println!("[{}] the slow operation finished (unexpected!)", at()),
        Err(elapsed) => println!("[{}] slow operation: {elapsed} after 50 ms", at()),
    }
    let fast = async { "pong" };
    let reply = timeout(Duration::from_millis(50), fast).await;
    println!("[{}] fast operation: {reply:?}", at());

    // 3. An interval: five ticks 20 ms apart, on the original schedule.
    let mut ticks = interval(Duration::from_millis(20));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    for n in 1..=5 {
        let scheduled = ticks.tick().await;
        println!(
            "[{}] tick {n}, scheduled for {:>5.1} ms",
            at(),
            (scheduled - start).as_secs_f64() * 1e3
        );
    }

    // 4. A deadline guard reset on every event: the common network case.
    //    A coarse 10 ms timer batches wakeups; resetting later takes no lock.
    let timer = Timer::builder().tick(Duration::from_millis(10)).build();
    let mut idle = timer.handle().sleep(Duration::from_millis(100));
    for event in 1..=3 {
        sleep(Duration::from_millis(40)).await; // traffic arrives
        std::pin::Pin::new(&mut idle).reset(Instant::now() + Duration::from_millis(100));
        println!("[{}] event {event}: idle deadline pushed back", at());
    }
    idle.await;
    println!("[{}] idle for 100 ms: connection would be closed", at());

    println!("all done in {}", at());
}
