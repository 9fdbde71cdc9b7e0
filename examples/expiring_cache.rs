//! An expiring cache: entries live for a TTL after they were last read or
//! written, and a `DelayQueue` expires them. What happens is printed as it
//! happens.
//!
//! Run with `cargo run --example expiring_cache`.

use std::collections::HashMap;
use std::future::poll_fn;
use std::task::{Context, Poll};
use std::time::Duration;

use tiered_timer::delay_queue::Key;
use tiered_timer::{sleep, DelayQueue, Instant};

/// A TTL cache: a map of values, and a queue of their expiry times.
struct Cache {
    ttl: Duration,
    entries: HashMap<&'static str, (String, Key)>,
    expirations: DelayQueue<&'static str>,
}

impl Cache {
    fn new(ttl: Duration) -> Cache {
        Cache {
            ttl,
            entries: HashMap::new(),
            expirations: DelayQueue::new(),
        }
    }

    /// Inserts or replaces `name`, expiring one TTL from now.
    fn insert(&mut self, name: &'static str, value: String) {
        match self.entries.get_mut(name) {
            Some((old, key)) => {
                *old = value;
                self.expirations.reset(key, self.ttl);
            }
            None => {
                let key = self.expirations.insert(name, self.ttl);
                self.entries.insert(name, (value, key));
            }
        }
    }

    /// Reads `name`; a hit refreshes it for another TTL.
    fn get(&mut self, name: &str) -> Option<&str> {
        let (value, key) = self.entries.get(name)?;
        self.expirations.reset(key, self.ttl);
        Some(value)
    }

    /// Removes what has expired, with the instants it was due at. Waits
    /// for the next expiry if nothing is due yet; `Ready` with nothing if
    /// the cache is empty.
    fn poll_purge(&mut self, cx: &mut Context<'_>) -> Poll<Vec<(&'static str, Instant)>> {
        let mut purged = Vec::new();
        loop {
            match self.expirations.poll_expired(cx) {
                Poll::Ready(Some(expired)) => {
                    let due = expired.deadline();
                    let name = expired.into_inner();
                    self.entries.remove(name);
                    purged.push((name, due));
                }
                Poll::Ready(None) => return Poll::Ready(purged),
                Poll::Pending if purged.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(purged),
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let start = Instant::now();
    let ms = move |t: Instant| format!("{:>5.1} ms", (t - start).as_secs_f64() * 1e3);
    let at = move || ms(Instant::now());
    let show = move |purged: Vec<(&str, Instant)>| {
        let list: Vec<_> = purged
            .iter()
            .map(|(name, due)| format!("{name} (due at {})", ms(*due)))
            .collect();
        list.join(", ")
    };

    // 1. Three sessions with a 100 ms TTL.
    let mut cache = Cache::new(Duration::from_millis(100));
    for (name, user) in [("s1", "alice"), ("s2", "bob"), ("s3", "carol")] {
        cache.insert(name, user.to_string());
    }
    println!("[{}] cached s1, s2, s3 with a 100 ms TTL", at());

    // 2. s1 is read every 40 ms, so it stays; s2 and s3 are left alone.
    for _ in 0..3 {
        sleep(Duration::from_millis(40)).await;
        let user = cache.get("s1").map(str::to_owned);
        println!("[{}] read s1 -> {user:?}: refreshed for 100 ms", at());
    }

    // 3. s2 and s3 came due at 100 ms, while we slept; the purge after the
    //    third read finds them.
    // Only now does this task poll the queue: what fell due meanwhile comes
    // out at once (a real cache would purge from a task of its own).
    let purged = poll_fn(|cx| cache.poll_purge(cx)).await;
    println!("[{}] purged, now that we look: {}", at(), show(purged));
    assert!(start.elapsed() >= Duration::from_millis(100), "never early");
    assert_eq!(cache.get("s2"), None);

    // 4. s2 comes back 30 ms later; s1 is no longer read. Each expires 100
    //    ms after it was last touched, and the purge wakes for each, never
    //    before its deadline.
    sleep(Duration::from_millis(30)).await;
    cache.insert("s2", "bob again".to_string());
    println!("[{}] cached s2 again", at());
    while !cache.entries.is_empty() {
        let purged = poll_fn(|cx| cache.poll_purge(cx)).await;
        assert!(
            purged.iter().all(|(_, due)| Instant::now() >= *due),
            "never early"
        );
        println!("[{}] expired {}", at(), show(purged));
    }
    assert!(cache.entries.is_empty() && cache.expirations.is_empty());

    // 5. A deadline nobody means to reach: `Duration::MAX` is clamped to
    //    about 30 years (tokio-util's queue panics beyond about 2.2 years).
    cache.ttl = Duration::MAX;
    cache.insert("pinned", "config".to_string());
    let key = cache.entries["pinned"].1;
    let years =
        (cache.expirations.deadline(&key) - Instant::now()).as_secs_f64() / (365.0 * 86_400.0);
    let years = years.round();
    println!(
        "[{}] pinned an entry: it expires in about {years} years",
        at()
    );

    println!("all done in {}", at());
}
