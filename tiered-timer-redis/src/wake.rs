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
//! * Losing and re-establishing the subscription are `tracing` events
//!   (warn and info): they are the reconnects an operator wants to see.

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
        queue: String,
        client: redis::Client,
        channels: Vec<String>,
        wake: broadcast::Sender<Wake>,
        timeout: Duration,
    ) -> Subscriber {
        Subscriber(tokio::spawn(run(queue, client, channels, wake, timeout)))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run(
    queue: String,
    client: redis::Client,
    channels: Vec<String>,
    wake: broadcast::Sender<Wake>,
    timeout: Duration,
) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(50);
    let mut backoff = FIRST_BACKOFF;
    let mut lost = false;
    loop {
        let subscribe = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channels).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let subscribed = tiered_timer::timeout(timeout, subscribe).await;
        if let Ok(Ok(pubsub)) = subscribed {
            if lost {
                tracing::info!(queue = %queue, channels = channels.len(), "wake-up subscription re-established; waiters read again");
            } else {
                tracing::debug!(queue = %queue, channels = channels.len(), "wake-up subscription established");
            }
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
            lost = true;
            tracing::warn!(queue = %queue, channels = channels.len(), "wake-up subscription lost; reconnecting");
        } else {
            let error = match subscribed {
                Ok(Err(error)) => error.to_string(),
                _ => format!("no answer within {timeout:?}"),
            };
            tracing::warn!(queue = %queue, channels = channels.len(), %error, retry_in = ?backoff, "could not subscribe to wake-ups");
            lost = true;
        }
        tiered_timer::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}
