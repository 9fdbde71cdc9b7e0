//! Code written for `tokio::time` compiles and behaves the same with only
//! the import changed. Each function below is written the way tokio's docs
//! and common services use the API.

mod support;

use std::io;
use std::time::Duration;

// The only line that differs from a tokio program:
use tiered_timer::{self as time, Instant, MissedTickBehavior};

use support::ms;

async fn read_with_deadline(rx: tokio::sync::oneshot::Receiver<u8>) -> io::Result<u8> {
    // `?` converts `Elapsed` into `io::Error`, as with tokio.
    let value = time::timeout(Duration::from_millis(50), rx).await?;
    value.map_err(|_| io::Error::other("sender dropped"))
}

async fn heartbeat_loop(beats: usize) -> Vec<Instant> {
    let mut interval = time::interval(Duration::from_millis(10));
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut seen = Vec::new();
    while seen.len() < beats {
        seen.push(interval.tick().await);
    }
    seen
}

async fn idle_timeout_select(events: &mut tokio::sync::mpsc::Receiver<()>) -> usize {
    // The pinned-sleep pattern from tokio's docs works unchanged.
    let sleep = time::sleep(Duration::from_millis(100));
    tokio::pin!(sleep);
    let mut handled = 0;
    loop {
        tokio::select! {
            () = &mut sleep => return handled,
            Some(()) = events.recv() => {
                handled += 1;
                sleep.as_mut().reset(Instant::now() + Duration::from_millis(100));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_with_question_mark() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tx.send(7).unwrap();
    assert_eq!(read_with_deadline(rx).await.unwrap(), 7);
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let err = read_with_deadline(rx).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[tokio::test(start_paused = true)]
async fn heartbeat() {
    let start = Instant::now();
    let beats = heartbeat_loop(4).await;
    let offsets: Vec<_> = beats.iter().map(|b| *b - start).collect();
    assert_eq!(offsets, vec![ms(0), ms(10), ms(20), ms(30)]);
}

#[tokio::test(start_paused = true)]
async fn idle_guard_reset_on_events() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let start = Instant::now();
    let sender = tokio::spawn(async move {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            tx.send(()).await.unwrap();
        }
        // Keep the channel open so only the idle timer can end the loop.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    assert_eq!(idle_timeout_select(&mut rx).await, 3);
    // Last event at 180 ms, then 100 ms of silence.
    assert_eq!(start.elapsed(), ms(280));
    sender.abort();
}

#[tokio::test(start_paused = true)]
async fn sleep_until_and_elapsed_checks() {
    let deadline = Instant::now() + Duration::from_millis(30);
    let mut sleep = Box::pin(time::sleep_until(deadline));
    assert!(!sleep.is_elapsed());
    assert_eq!(sleep.deadline(), deadline);
    (&mut sleep).await;
    assert!(sleep.is_elapsed());
    let result = time::timeout_at(Instant::now() + ms(5), std::future::pending::<()>()).await;
    assert!(result.is_err());
    let mut at = time::interval_at(Instant::now() + ms(3), ms(3));
    assert_eq!(at.period(), ms(3));
    at.tick().await;
}
