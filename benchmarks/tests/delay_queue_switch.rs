//! The switch: one set of tests, written against
//! `tokio_util::time::DelayQueue`, run twice, once with tokio-util's import
//! and once with ours. Nothing but the `use` line differs between the two
//! modules the macro expands to, so code that passes with tokio-util passes
//! after changing its imports.
//!
//! The tests keep to what tokio-util documents and does (they pass against
//! it): deadlines under 2^36 ms, keys used only while their value is in the
//! queue.

macro_rules! switch_tests {
    ($name:ident, $($import:tt)*) => {
        mod $name {
            // The only line that changes when switching.
            $($import)*

            use std::collections::HashMap;
            use std::future::poll_fn;
            use std::task::Poll;
            use std::time::Duration;

            use futures_core::Stream;
            use tokio::time::{self, Instant};
            use tokio_test::{assert_pending, assert_ready, task};

            fn ms(n: u64) -> Duration {
                Duration::from_millis(n)
            }

            macro_rules! poll {
                ($queue:ident) => {
                    $queue.enter(|cx, mut queue| queue.poll_expired(cx))
                };
            }

            #[tokio::test(start_paused = true)]
            async fn insert_poll_remove_reset() {
                let mut queue = task::spawn(DelayQueue::new());
                let start = Instant::now();
                let a = queue.insert("a", ms(10));
                let b = queue.insert_at("b", start + ms(20));
                let c = queue.insert("c", ms(30));
                assert_eq!(queue.len(), 3);
                assert!(queue.deadline(&a) >= start + ms(10));
                assert!(queue.deadline(&a) < queue.deadline(&b));

                assert_eq!(queue.remove(&b).into_inner(), "b");
                assert!(queue.try_remove(&b).is_none());
                queue.reset(&c, ms(5));
                assert_eq!(queue.peek(), Some(c));

                assert_pending!(poll!(queue));
                time::advance(ms(5)).await;
                assert!(queue.is_woken());
                let expired: delay_queue::Expired<&str> = assert_ready!(poll!(queue)).unwrap();
                assert_eq!(expired.key(), c);
                assert_eq!(*expired.get_ref(), "c");
                assert!(expired.deadline() >= start + ms(5));
                assert_pending!(poll!(queue));

                time::advance(ms(5)).await;
                assert_eq!(assert_ready!(poll!(queue)).unwrap().into_inner(), "a");
                assert!(assert_ready!(poll!(queue)).is_none());
                assert!(queue.is_empty());
            }

            #[tokio::test(start_paused = true)]
            async fn a_cache_with_ttls() {
                struct Cache {
                    entries: HashMap<u32, (String, delay_queue::Key)>,
                    expirations: DelayQueue<u32>,
                }
                let mut cache = Cache {
                    entries: HashMap::new(),
                    expirations: DelayQueue::with_capacity(16),
                };
                for id in 0..10u32 {
                    let key = cache.expirations.insert(id, ms(100 + u64::from(id)));
                    cache.entries.insert(id, (format!("value {id}"), key));
                }
                // Refresh the even ones.
                time::advance(ms(50)).await;
                for id in (0..10).step_by(2) {
                    let key = cache.entries[&id].1;
                    cache.expirations.reset(&key, ms(100));
                }
                time::advance(ms(60)).await;
                let mut gone = Vec::new();
                poll_fn(|cx| {
                    while let Poll::Ready(Some(expired)) = cache.expirations.poll_expired(cx) {
                        let id = expired.into_inner();
                        cache.entries.remove(&id);
                        gone.push(id);
                    }
                    Poll::Ready(())
                })
                .await;
                assert_eq!(gone, [1, 3, 5, 7, 9]);
                let mut left: Vec<u32> = cache.entries.keys().copied().collect();
                left.sort_unstable();
                assert_eq!(left, [0, 2, 4, 6, 8]);
            }

            #[tokio::test(start_paused = true)]
            async fn as_a_stream() {
                let mut queue = DelayQueue::new();
                queue.insert(2, ms(20));
                queue.insert(1, ms(10));
                let mut queue = std::pin::Pin::new(&mut queue);
                let mut out = Vec::new();
                while let Some(expired) = poll_fn(|cx| queue.as_mut().poll_next(cx)).await {
                    out.push(expired.into_inner());
                }
                assert_eq!(out, [1, 2]);
            }

            #[tokio::test(start_paused = true)]
            async fn clear_capacity_and_shrink() {
                let mut queue: DelayQueue<u64> = DelayQueue::with_capacity(4);
                assert!(queue.capacity() >= 4);
                queue.reserve(10);
                assert!(queue.capacity() >= 10);
                let keys: Vec<_> = (0..100).map(|i| queue.insert(i, ms(i + 1))).collect();
                for key in &keys[1..] {
                    queue.remove(key);
                }
                queue.shrink_to_fit();
                queue.compact();
                assert_eq!(queue.remove(&keys[0]).into_inner(), 0);
                queue.insert(7, ms(1));
                queue.clear();
                assert!(queue.is_empty());
                let mut queue = task::spawn(queue);
                assert!(assert_ready!(poll!(queue)).is_none());
            }
        }
    };
}

switch_tests!(
    tokio_util_queue,
    use tokio_util::time::{delay_queue, DelayQueue};
);
switch_tests!(
    tiered_timer_queue,
    use tiered_timer::{delay_queue, DelayQueue};
);
