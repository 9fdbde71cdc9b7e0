//! Counters and a histogram through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`), for applications that already export
//! `metrics` to Prometheus, OpenTelemetry or StatsD. Without the feature
//! every function here is empty and inlined away.
//!
//! Every metric has the label `queue` (the queue's name):
//!
//! | metric | kind | counts |
//! |---|---|---|
//! | `ttr_jobs_claimed_total` | counter | deliveries by [`Queue::next`](crate::Queue::next) (first ones and redeliveries) |
//! | `ttr_jobs_acked_total` | counter | acks that succeeded ([`Job::ack`](crate::Job::ack), [`Queue::ack_many`](crate::Queue::ack_many), [`Job::ack_batched`](crate::Job::ack_batched)) |
//! | `ttr_jobs_retried_total` | counter | jobs given back to be delivered again after a delay ([`Job::retry_after`](crate::Job::retry_after), and a [`Job::fail`](crate::Job::fail) with attempts left) |
//! | `ttr_jobs_failed_total` | counter | failures with a reason ([`Job::fail`](crate::Job::fail), [`Job::retry_after_with_reason`](crate::Job::retry_after_with_reason), [`Job::bury`](crate::Job::bury)) |
//! | `ttr_jobs_dead_lettered_total` | counter | jobs moved to the dead letters, whatever the path (buried, failed or retried on the last attempt, lease lost on the last attempt) |
//! | `ttr_leases_lost_total` | counter | calls that found their lease lost ([`Error::LeaseExpired`](crate::Error::LeaseExpired)), acks of [`Queue::ack_many`](crate::Queue::ack_many) and [`Job::ack_batched`](crate::Job::ack_batched) refused for it, and leases [`Job::keep_alive`](crate::Job::keep_alive) gave up |
//! | `ttr_lease_renewals_total` | counter | lease renewals that succeeded |
//! | `ttr_claim_lateness_seconds` | histogram | Redis' now at a claim minus the job's due time, for jobs claimed from the waiting jobs (not redeliveries after a lost lease) |
//!
//! Ground rule: one call per event, at the place the event is certain
//! (after Redis said so), one line at each call site.

#[cfg(feature = "metrics")]
mod on {
    use std::time::Duration;

    fn count(name: &'static str, queue: &str, n: u64) {
        metrics::counter!(name, "queue" => queue.to_owned()).increment(n);
    }

    pub(crate) fn claimed(queue: &str, lateness: Option<Duration>) {
        count("ttr_jobs_claimed_total", queue, 1);
        if let Some(lateness) = lateness {
            metrics::histogram!("ttr_claim_lateness_seconds", "queue" => queue.to_owned())
                .record(lateness.as_secs_f64());
        }
    }

    pub(crate) fn acked(queue: &str) {
        count("ttr_jobs_acked_total", queue, 1);
    }

    pub(crate) fn acked_many(queue: &str, acked: u64, lost: u64) {
        count("ttr_jobs_acked_total", queue, acked);
        count("ttr_leases_lost_total", queue, lost);
    }

    pub(crate) fn retried(queue: &str) {
        count("ttr_jobs_retried_total", queue, 1);
    }

    pub(crate) fn failed(queue: &str) {
        count("ttr_jobs_failed_total", queue, 1);
    }

    pub(crate) fn dead_lettered(queue: &str) {
        count("ttr_jobs_dead_lettered_total", queue, 1);
    }

    pub(crate) fn lease_lost(queue: &str) {
        count("ttr_leases_lost_total", queue, 1);
    }

    pub(crate) fn lease_renewed(queue: &str) {
        count("ttr_lease_renewals_total", queue, 1);
    }
}

#[cfg(not(feature = "metrics"))]
mod on {
    use std::time::Duration;

    #[inline(always)]
    pub(crate) fn claimed(_queue: &str, _lateness: Option<Duration>) {}
    #[inline(always)]
    pub(crate) fn acked(_queue: &str) {}
    #[inline(always)]
    pub(crate) fn acked_many(_queue: &str, _acked: u64, _lost: u64) {}
    #[inline(always)]
    pub(crate) fn retried(_queue: &str) {}
    #[inline(always)]
    pub(crate) fn failed(_queue: &str) {}
    #[inline(always)]
    pub(crate) fn dead_lettered(_queue: &str) {}
    #[inline(always)]
    pub(crate) fn lease_lost(_queue: &str) {}
    #[inline(always)]
    pub(crate) fn lease_renewed(_queue: &str) {}
}

pub(crate) use on::*;
