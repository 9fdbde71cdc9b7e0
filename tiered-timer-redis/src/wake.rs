//! The wake-up side of "no polling": one pub/sub subscription per
//! [`Queue`](crate::Queue), fanned out to every waiting
//! [`next`](crate::Queue::next).
//!
//! Ground rules:
//!
//! * The subscriber task owns the pub/sub connection; it only sends on the
//!   broadcast channel, never touches a queue's keys.
//! * A message says "a job is due in `d` ms from Redis' now". The task
//!   turns it into a local `Instant` at once (a duration, not a clock
//!   comparison), and waiters sleeping past it shorten their sleep.
//! * Whenever the subscription is (re)established, and whenever it is lost,
//!   the task sends [`Wake::Reread`]: messages published while it was down
//!   are gone, so every waiter reads Redis once more. That re-read is the
//!   whole cost of a lost notification.
//! * Waiters subscribe to the broadcast before they read Redis, so nothing
//!   announced after their read can be missed; a waiter that lags behind
//!   the broadcast's buffer re-reads too.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the subscriber tells waiting workers.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wake {
    /// A job was scheduled that is due at this (local) instant.
    At(Instant),
    /// Messages may have been missed: read Redis again.
    Reread,
}

/// The subscriber task; aborted when the queue (its last clone) is
/// dropped.
#[derive(Debug)]
pub(crate) struct Subscriber(JoinHandle<()>);

impl Subscriber {
    /// Spawns the task on the current runtime.
    pub(crate) fn spawn(
        client: redis::Client,
        channels: Vec<String>,
        wake: broadcast::Sender<Wake>,
        timeout: Duration,
    ) -> Subscriber {
        Subscriber(tokio::spawn(run(client, channels, wake, timeout)))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run(
    client: redis::Client,
    channels: Vec<String>,
    wake: broadcast::Sender<Wake>,
    timeout: Duration,
) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(50);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let subscribe = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        if let Ok(Ok(pubsub)) = tiered_timer::timeout(timeout, subscribe).await {
            backoff = FIRST_BACKOFF;
            let _ = wake.send(Wake::Reread);
            let mut messages = pubsub.into_on_message();
            while let Some(message) = messages.next().await {
                let due_in = std::str::from_utf8(message.get_payload_bytes())
                    .ok()
                    .and_then(|text| text.parse::<u64>().ok());
                let _ = match due_in {
                    Some(ms) => wake.send(Wake::At(Instant::now() + Duration::from_millis(ms))),
                    None => wake.send(Wake::Reread),
                };
            }
            let _ = wake.send(Wake::Reread);
        }
        tiered_timer::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}
