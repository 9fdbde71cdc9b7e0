//! Job ids: [`JobId`], and the random ids and tokens this crate makes.
//! (The checks of ids and queue names are in `checks.rs`.)

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// A job's id: a string, unique within its queue.
///
/// [`Queue::schedule`](crate::Queue::schedule) makes a random one;
/// [`Queue::schedule_with_id`](crate::Queue::schedule_with_id) takes yours,
/// which makes scheduling idempotent.
///
/// # Examples
///
/// ```
/// use tiered_timer_jobs::JobId;
///
/// let id = JobId::from("order-42");
/// assert_eq!(id.as_str(), "order-42");
/// assert_eq!(id.to_string(), "order-42");
/// assert_eq!(id, JobId::from(String::from("order-42")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobId(String);

impl JobId {
    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for JobId {
    fn from(id: &str) -> JobId {
        JobId(id.to_owned())
    }
}

impl From<String> for JobId {
    fn from(id: String) -> JobId {
        JobId(id)
    }
}

impl From<&JobId> for JobId {
    fn from(id: &JobId) -> JobId {
        id.clone()
    }
}

impl AsRef<str> for JobId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// 128 random bits as 32 hex digits: a job id or a lease token. Random
/// keys per process (std's `RandomState`, seeded by the OS) hashing a
/// process-wide counter.
pub(crate) fn random_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut first = RandomState::new().build_hasher();
    first.write_u64(n);
    let a = first.finish();
    let mut second = RandomState::new().build_hasher();
    second.write_u64(n);
    second.write_u64(a);
    format!("{a:016x}{:016x}", second.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_differ() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| random_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.len() == 32));
    }
}
