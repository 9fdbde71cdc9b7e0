//! The statements of the Postgres backend, each one round trip, written
//! for one schema when a handle opens (the schema's name is checked:
//! `schema.rs`).
//!
//! Every "now" is the database's `clock_timestamp()`, read once per
//! statement (the `t` CTE, materialized): a job is due when
//! `at_ms <= now` (now rounded down to the ms), and a delay counts from
//! now rounded up, so a job is never early by the database's clock,
//! whatever the clients' clocks say. Every statement that makes a job
//! waiting also sends `pg_notify` on the queue's channel with its due
//! time, which Postgres delivers at commit: inside the caller's
//! transaction, waiting workers learn of the job when (and only if) it
//! commits.

use crate::data::history::{ERROR_KEPT, HISTORY_LEN, THROUGHPUT_MINUTES};

/// `t`: the database's now, in µs and in ms (rounded down), read once.
const NOW: &str = "t AS MATERIALIZED (SELECT us, us / 1000 AS now FROM \
     (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) AS c)";

/// The due time of a delay `d` ms from `t`'s now: now rounded up, plus
/// `d`.
fn after(d: &str) -> String {
    format!("((SELECT us FROM t) + 999) / 1000 + {d}")
}

/// The `history` of the job row `j` with its running attempt (number
/// `j.attempts`, claimed at `j.claimed_ms` by `j.holder`) appended, ended
/// at `t`'s now with `outcome` (an SQL text: `'r'` retried, `'f'` failed,
/// `'l'` released, `'x'` lease expired, `'b'` buried, as on Redis) and
/// `error` (SQL text or NULL, at most `ERROR_KEPT` characters kept), the
/// oldest dropped beyond `HISTORY_LEN`. Unchanged if the claim was not
/// recorded (made by a version 1 build). In an `UPDATE .. SET`, `j.*` are
/// the row's values before the update.
fn ended(outcome: &str, error: &str) -> String {
    format!(
        "CASE WHEN j.claimed_ms IS NULL THEN j.history ELSE (
           SELECT CASE WHEN jsonb_array_length(x) > {len} THEN x - 0 ELSE x END
           FROM (SELECT coalesce(j.history, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
             'n', j.attempts, 'c', j.claimed_ms, 'h', j.holder, 'o', {outcome},
             'e', (SELECT now FROM t), 'r', left({error}, {kept}))) AS x) AS y) END",
        len = HISTORY_LEN,
        kept = ERROR_KEPT,
    )
}

/// Two CTEs (after `t`; `$1` is the queue) that add `processed` and
/// `failed` (SQL counts) to this minute's row of the connection's slot in
/// `throughput` (no row if both are 0), and delete the queue's minutes
/// older than the last `THROUGHPUT_MINUTES` (an index range that is empty
/// but once a minute): part of the statement that acks or ends the
/// attempts, so counting costs no round trip.
fn tally(s: &str, processed: &str, failed: &str) -> String {
    format!(
        "stale AS (
           DELETE FROM {s}.throughput WHERE queue = $1
             AND minute <= (SELECT now FROM t) / 60000 - {keep}),
         tally AS (
           INSERT INTO {s}.throughput AS x (queue, minute, slot, processed, failed)
           SELECT $1, (SELECT now FROM t) / 60000, pg_backend_pid() % 16, c.p, c.f
           FROM (SELECT ({processed}) AS p, ({failed}) AS f) AS c WHERE c.p + c.f > 0
           ON CONFLICT (queue, minute, slot) DO UPDATE
           SET processed = x.processed + excluded.processed, failed = x.failed + excluded.failed)",
        keep = THROUGHPUT_MINUTES,
    )
}

/// What a dead letter replaced by a new job of its id forgets (set in an
/// `ON CONFLICT` update): the new job starts with no history.
pub(super) const FRESH: &str =
    "created_ms = excluded.created_ms, claimed_ms = NULL, holder = NULL, \
     history = NULL";

/// One field of every entry of row `j`'s history, as an array in the
/// history's order (`a` is the entry).
fn field(of: &str) -> String {
    format!(
        "ARRAY(SELECT {of} FROM jsonb_array_elements(coalesce(j.history, '[]'::jsonb)) \
         WITH ORDINALITY AS x(a, k) ORDER BY k)"
    )
}

/// Every statement, for one schema.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The schema's (checked) name, for the statements built elsewhere
    /// (`recur.rs`).
    pub(crate) schema: String,
    pub(crate) schedule: String,
    pub(crate) schedule_many: String,
    pub(crate) cancel: String,
    pub(crate) claim: String,
    pub(crate) ack: String,
    pub(crate) ack_many: String,
    pub(crate) give_up: String,
    pub(crate) extend: String,
    pub(crate) release: String,
    pub(crate) count: String,
    pub(crate) stats: String,
    pub(crate) lateness: String,
    pub(crate) throughput: String,
    pub(crate) requeue: String,
    pub(crate) requeue_batch: String,
    pub(crate) purge: String,
    pub(crate) purge_batch: String,
    pub(crate) job: String,
    pub(crate) list: String,
    pub(crate) promote: String,
    pub(crate) register: String,
    pub(crate) exists: String,
    pub(crate) queues: String,
}

/// The lateness buckets' upper bounds (`LATENESS_BOUNDS_MS`), as an
/// array literal: `width_bucket(late - 1, bounds)` is the bucket of a
/// lateness in whole ms (0 for on time, 19 past the last bound).
fn bounds() -> String {
    let bounds: Vec<String> = crate::data::lateness::LATENESS_BOUNDS_MS
        .iter()
        .map(u64::to_string)
        .collect();
    format!("'{{{}}}'::bigint[]", bounds.join(","))
}

impl Sql {
    /// The statements on schema `s`.
    pub(crate) fn new(s: &str) -> Sql {
        let jobs = format!("{s}.jobs");
        Sql {
            schema: s.to_owned(),
            // $1 queue, $2 id, $3 delay?, $4 delay or time (ms), $5
            // payload, $6 channel. A dead letter of the same id is
            // replaced; a waiting or leased one is left alone (no row).
            schedule: format!(
                "WITH {NOW}, ins AS (
                   INSERT INTO {jobs} AS j (queue, id, state, at_ms, payload, created_ms)
                   VALUES ($1, $2, 0, CASE WHEN $3 THEN {due} ELSE $4 END, $5,
                     (SELECT now FROM t))
                   ON CONFLICT (queue, id) DO UPDATE SET state = 0, at_ms = excluded.at_ms,
                     payload = excluded.payload, attempts = 0, token = NULL,
                     deadline_ms = NULL, last_error = NULL, {fresh}
                   WHERE j.state = 2
                   RETURNING at_ms)
                 SELECT at_ms, pg_notify($6, at_ms::text) FROM ins",
                due = after("$4"),
                fresh = FRESH,
            ),
            // $1 queue, $2 ids, $3 delay?, $4 delays or times, $5
            // payloads, $6 channel, $7 the µs to count delays from (NULL:
            // now). The first of repeated ids wins. Returns how many were
            // new, and the µs used.
            schedule_many: format!(
                "WITH {NOW}, base AS MATERIALIZED (SELECT coalesce($7, (SELECT us FROM t)) AS us),
                 input AS (
                   SELECT DISTINCT ON (id) id, v, p FROM unnest($2::text[], $4::bigint[], $5::bytea[])
                     WITH ORDINALITY AS x(id, v, p, n) ORDER BY id, n),
                 ins AS (
                   INSERT INTO {jobs} AS j (queue, id, state, at_ms, payload, created_ms)
                   SELECT $1, id, 0, CASE WHEN $3 THEN ((SELECT us FROM base) + 999) / 1000 + v
                                     ELSE v END, p, (SELECT now FROM t) FROM input
                   ON CONFLICT (queue, id) DO UPDATE SET state = 0, at_ms = excluded.at_ms,
                     payload = excluded.payload, attempts = 0, token = NULL,
                     deadline_ms = NULL, last_error = NULL, {FRESH}
                   WHERE j.state = 2
                   RETURNING at_ms)
                 SELECT (SELECT count(*) FROM ins), (SELECT us FROM base),
                   (SELECT pg_notify($6, m::text) FROM (SELECT min(at_ms) AS m FROM ins) AS e
                     WHERE m IS NOT NULL)::text"
            ),
            // $1 queue, $2 id.
            // A recurrence's waiting occurrence (`chain`) is not
            // cancelled alone: its chain would stop (`unrecur` removes it).
            cancel: format!(
                "DELETE FROM {jobs} WHERE queue = $1 AND id = $2 AND state = 0
                   AND chain IS NOT TRUE"
            ),
            claim: claim(&jobs, s),
            // $1 queue, $2 id, $3 token. Fenced by the token alone (as on
            // Redis): an ack after the lease ran out still lands if
            // nobody took the job meanwhile. Returns how many were acked
            // (0 or 1), counted as processed.
            ack: format!(
                "WITH {NOW}, done AS (
                   DELETE FROM {jobs} WHERE queue = $1 AND id = $2 AND state = 1 AND token = $3
                   RETURNING id),
                 {tally}
                 SELECT count(*) FROM done",
                tally = tally(s, "SELECT count(*) FROM done", "0"),
            ),
            // $1 queue, $2 ids, $3 tokens: returns the ids acked, counted
            // as processed.
            ack_many: format!(
                "WITH {NOW}, done AS (
                   DELETE FROM {jobs} AS j USING unnest($2::text[], $3::bigint[]) AS a(id, token)
                   WHERE j.queue = $1 AND j.id = a.id AND j.state = 1 AND j.token = a.token
                   RETURNING j.id),
                 {tally}
                 SELECT id FROM done",
                tally = tally(s, "SELECT count(*) FROM done", "0"),
            ),
            // $1 queue, $2 id, $3 token, $4 bury at once?, $5 delay (ms),
            // $6 max attempts, $7 reason (NULL: a plain retry, which keeps
            // the last error), $8 channel. Fenced by the token and the
            // lease's expiry. Returns the new state (0 waiting, 2 dead).
            // The attempt goes to the history (buried; failed with a
            // reason; else retried), counted as failed unless retried.
            give_up: format!(
                "WITH {NOW}, held AS (
                   SELECT id, $4 OR attempts >= $6 AS dead, CASE
                       WHEN $7::text IS NOT NULL THEN $7
                       WHEN attempts >= $6 THEN 'retried on its last attempt (' || attempts
                         || ' of ' || $6 || ')' || coalesce(' (last error: ' || last_error || ')', '')
                       ELSE last_error END AS error
                   FROM {jobs}
                   WHERE queue = $1 AND id = $2 AND state = 1 AND token = $3
                     AND at_ms > (SELECT now FROM t) FOR UPDATE),
                 done AS (
                   UPDATE {jobs} AS j SET token = NULL,
                     state = CASE WHEN h.dead THEN 2 ELSE 0 END,
                     at_ms = CASE WHEN h.dead THEN (SELECT now FROM t) ELSE {due} END,
                     last_error = h.error,
                     history = {history}, claimed_ms = NULL, holder = NULL
                   FROM held AS h WHERE j.queue = $1 AND j.id = h.id
                   RETURNING j.state, j.at_ms),
                 {tally}
                 SELECT state, CASE WHEN state = 0 THEN pg_notify($8, at_ms::text) END::text
                 FROM done",
                due = after("$5"),
                history = ended(
                    "CASE WHEN h.dead THEN 'b' WHEN $7::text IS NOT NULL THEN 'f' ELSE 'r' END",
                    "CASE WHEN h.dead OR $7::text IS NOT NULL THEN h.error END",
                ),
                tally = tally(
                    s,
                    "0",
                    "SELECT count(*) FROM held WHERE dead OR $7::text IS NOT NULL"
                ),
            ),
            // $1 queue, $2 id, $3 token, $4 lease (ms), $5 channel.
            // Returns the new expiry; wakes waiting workers if it moved
            // earlier (they may sleep until the old one).
            extend: format!(
                "WITH {NOW}, held AS (
                   SELECT id, at_ms AS old FROM {jobs}
                   WHERE queue = $1 AND id = $2 AND state = 1 AND token = $3
                     AND at_ms > (SELECT now FROM t) FOR UPDATE),
                 done AS (
                   UPDATE {jobs} AS j SET at_ms = (SELECT now FROM t) + $4
                   FROM held AS h WHERE j.queue = $1 AND j.id = h.id
                   RETURNING j.at_ms, h.old)
                 SELECT at_ms, CASE WHEN at_ms < old THEN pg_notify($5, at_ms::text) END::text
                 FROM done"
            ),
            // $1 queue, $2 id, $3 token, $4 channel: due at its deadline
            // (never later than now), the attempt not counted.
            release: format!(
                "WITH {NOW}, held AS (
                   SELECT id FROM {jobs}
                   WHERE queue = $1 AND id = $2 AND state = 1 AND token = $3
                     AND at_ms > (SELECT now FROM t) FOR UPDATE),
                 done AS (
                   UPDATE {jobs} AS j SET state = 0, token = NULL,
                     attempts = greatest(j.attempts - 1, 0),
                     at_ms = least(coalesce(j.deadline_ms, (SELECT now FROM t)), (SELECT now FROM t)),
                     history = {history}, claimed_ms = NULL, holder = NULL
                   FROM held AS h WHERE j.queue = $1 AND j.id = h.id
                   RETURNING j.at_ms)
                 SELECT pg_notify($4, at_ms::text) FROM done",
                history = ended("'l'", "NULL"),
            ),
            // $1 queue, $2 state.
            count: format!("SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = $2"),
            // $1 queue: now, pending, due, earliest due, leased, expired,
            // earliest expiry, dead, latest death.
            stats: format!(
                "WITH {NOW} SELECT (SELECT now FROM t),
                   (SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = 0),
                   (SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = 0
                      AND at_ms <= (SELECT now FROM t)),
                   (SELECT min(at_ms) FROM {jobs} WHERE queue = $1 AND state = 0),
                   (SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = 1),
                   (SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = 1
                      AND at_ms <= (SELECT now FROM t)),
                   (SELECT min(at_ms) FROM {jobs} WHERE queue = $1 AND state = 1),
                   (SELECT count(*) FROM {jobs} WHERE queue = $1 AND state = 2),
                   (SELECT max(at_ms) FROM {jobs} WHERE queue = $1 AND state = 2)"
            ),
            // $1 queue: (bucket, count) rows.
            lateness: format!(
                "SELECT bucket, sum(count)::bigint FROM {s}.lateness WHERE queue = $1
                 GROUP BY bucket ORDER BY bucket"
            ),
            // $1 queue, $2 the first minute: now, then (minute,
            // processed, failed) rows (one row with NULLs if none).
            throughput: format!(
                "WITH {NOW} SELECT (SELECT now FROM t), m.minute, m.processed, m.failed
                 FROM t LEFT JOIN (
                   SELECT minute, sum(processed)::bigint AS processed, sum(failed)::bigint AS failed
                   FROM {s}.throughput WHERE queue = $1 AND minute >= $2 GROUP BY minute
                 ) AS m ON true ORDER BY m.minute"
            ),
            // $1 queue, $2 id, $3 channel.
            requeue: format!(
                "WITH {NOW}, done AS (
                   UPDATE {jobs} SET state = 0, at_ms = (SELECT now FROM t), attempts = 0,
                     deadline_ms = NULL, last_error = NULL
                   WHERE queue = $1 AND id = $2 AND state = 2 RETURNING at_ms)
                 SELECT pg_notify($3, at_ms::text) FROM done"
            ),
            // $1 queue, $2 batch, $3 channel: oldest deaths first.
            requeue_batch: format!(
                "WITH {NOW}, batch AS (
                   SELECT id FROM {jobs} WHERE queue = $1 AND state = 2
                   ORDER BY at_ms LIMIT $2 FOR UPDATE SKIP LOCKED),
                 done AS (
                   UPDATE {jobs} AS j SET state = 0, at_ms = (SELECT now FROM t), attempts = 0,
                     deadline_ms = NULL, last_error = NULL
                   FROM batch AS b WHERE j.queue = $1 AND j.id = b.id RETURNING j.at_ms)
                 SELECT count(*), (SELECT pg_notify($3, min(at_ms)::text) FROM done
                   HAVING count(*) > 0)::text FROM done"
            ),
            // $1 queue, $2 id.
            purge: format!("DELETE FROM {jobs} WHERE queue = $1 AND id = $2 AND state = 2"),
            // $1 queue, $2 batch.
            purge_batch: format!(
                "WITH batch AS (
                   SELECT id FROM {jobs} WHERE queue = $1 AND state = 2
                   ORDER BY at_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
                 DELETE FROM {jobs} AS j USING batch AS b WHERE j.queue = $1 AND j.id = b.id"
            ),
            // $1 queue, $2 id: now, then the job's row if it exists: its
            // history as one array per field, in order.
            job: format!(
                "WITH {NOW} SELECT (SELECT now FROM t), j.state, j.at_ms, j.attempts,
                   j.deadline_ms, j.payload, j.last_error, j.created_ms, j.claimed_ms, j.holder,
                   {n}, {c}, {h}, {o}, {e}, {r}
                 FROM t LEFT JOIN {jobs} AS j ON j.queue = $1 AND j.id = $2",
                n = field("(a->>'n')::integer"),
                c = field("(a->>'c')::bigint"),
                h = field("a->>'h'"),
                o = field("a->>'o'"),
                e = field("(a->>'e')::bigint"),
                r = field("a->>'r'"),
            ),
            // $1 queue, $2 state, $3 due only?, $4 newest first?, $5
            // offset, $6 limit, $7 preview bytes: now and the total on
            // every row (one row with NULLs if the page is empty).
            list: format!(
                "WITH {NOW}, chosen AS (
                   SELECT * FROM {jobs} WHERE queue = $1 AND state = $2
                     AND (NOT $3 OR at_ms <= (SELECT now FROM t))),
                 page AS (
                   SELECT id, at_ms, attempts, octet_length(payload) AS len,
                     substring(payload FROM 1 FOR $7) AS preview, last_error
                   FROM chosen
                   ORDER BY CASE WHEN $4 THEN -at_ms ELSE at_ms END, id
                   OFFSET $5 LIMIT $6)
                 SELECT (SELECT now FROM t), (SELECT count(*) FROM chosen),
                   p.id, p.at_ms, p.attempts, p.len, p.preview, p.last_error
                 FROM t LEFT JOIN page AS p ON true
                 ORDER BY CASE WHEN $4 THEN -p.at_ms ELSE p.at_ms END, p.id"
            ),
            // $1 queue, $2 id, $3 channel.
            promote: format!(
                "WITH {NOW}, done AS (
                   UPDATE {jobs} SET at_ms = least(at_ms, (SELECT now FROM t))
                   WHERE queue = $1 AND id = $2 AND state = 0 RETURNING at_ms)
                 SELECT pg_notify($3, at_ms::text) FROM done"
            ),
            // $1 queue.
            register: format!(
                "INSERT INTO {s}.queues (name) VALUES ($1) ON CONFLICT (name) DO NOTHING"
            ),
            // $1 queue.
            exists: format!("SELECT EXISTS (SELECT 1 FROM {s}.queues WHERE name = $1)"),
            queues: format!("SELECT name FROM {s}.queues ORDER BY name"),
        }
    }
}

/// The claim: one statement, one round trip, for `next` and
/// `next_batch` alike.
///
/// $1 queue, $2 the most jobs, $3 lease (ms), $4 max attempts, $5 the
/// holder (recorded with each claim; an expired lease taken back ends its
/// attempt in the history, counted as failed, as does a burial). The
/// lateness of the jobs taken goes to the connection's slot of the
/// histogram. Expired leases first (their jobs have waited longest;
/// those out of attempts go to the dead letters instead), then the
/// earliest due jobs, each range of the `(queue, state, at_ms)` index read
/// in order with `FOR UPDATE SKIP LOCKED`, so concurrent claimers take
/// disjoint jobs without waiting for each other, and a claim costs the
/// same however many workers claim. Each job gets attempt + 1, a fresh
/// token from the sequence, and a lease from the database's now.
///
/// Recurrences' waiting occurrences (`chain`) are passed over: their
/// claim is a transaction that also schedules the next occurrence
/// (`recur.rs`), run after this statement when its last column says one
/// is due (a lookup in the small partial index `jobs_chained`).
///
/// Returns one row per job claimed (one row with NULLs if none), each
/// with now, the next event left (the earliest waiting job or lease
/// expiry not taken by this claim: when to claim again), the ids
/// moved to the dead letters, and whether an occurrence is due.
fn claim(jobs: &str, s: &str) -> String {
    let bounds = bounds();
    let expired_error = "'lease expired after ' || j.attempts || ' attempt(s)'
               || coalesce(' (last error: ' || j.last_error || ')', '')";
    let buried_history = ended("'b'", expired_error);
    let expired_history = ended("'x'", "NULL");
    let tally = tally(
        s,
        "0",
        "(SELECT count(*) FROM buried) + (SELECT count(*) FROM claimed WHERE expired)",
    );
    format!(
        "WITH {NOW},
         expired AS MATERIALIZED (
           SELECT id, attempts FROM {jobs}
           WHERE queue = $1 AND state = 1 AND at_ms <= (SELECT now FROM t)
           ORDER BY at_ms LIMIT $2 FOR UPDATE SKIP LOCKED),
         due AS MATERIALIZED (
           SELECT id FROM {jobs}
           WHERE queue = $1 AND state = 0 AND at_ms <= (SELECT now FROM t)
             AND chain IS NOT TRUE
           ORDER BY at_ms
           LIMIT greatest(0, $2 - (SELECT count(*) FROM expired WHERE attempts < $4))
           FOR UPDATE SKIP LOCKED),
         buried AS (
           UPDATE {jobs} AS j SET state = 2, at_ms = (SELECT now FROM t), token = NULL,
             last_error = {expired_error}, history = {buried_history},
             claimed_ms = NULL, holder = NULL
           WHERE j.queue = $1
             AND j.id = ANY (ARRAY(SELECT id FROM expired WHERE attempts >= $4))
           RETURNING j.id),
         claimed AS (
           UPDATE {jobs} AS j SET state = 1, at_ms = (SELECT now FROM t) + $3,
             attempts = j.attempts + 1, token = nextval('{s}.tokens'),
             deadline_ms = CASE WHEN j.state = 0 THEN j.at_ms
                           ELSE coalesce(j.deadline_ms, (SELECT now FROM t)) END,
             history = CASE WHEN j.state = 1 THEN {expired_history} ELSE j.history END,
             claimed_ms = (SELECT now FROM t), holder = $5
           WHERE j.queue = $1 AND j.id = ANY (ARRAY(
             SELECT id FROM expired WHERE attempts < $4 UNION ALL SELECT id FROM due))
           RETURNING j.id, j.payload, j.deadline_ms, j.attempts, j.token, j.at_ms,
             j.id IN (SELECT id FROM expired) AS expired),
         late AS (
           INSERT INTO {s}.lateness (queue, slot, bucket, count)
           SELECT $1, pg_backend_pid() % 16, width_bucket((SELECT now FROM t) - c.deadline_ms - 1, {bounds}), count(*)
           FROM claimed AS c WHERE NOT c.expired GROUP BY 3 ORDER BY 3
           ON CONFLICT (queue, slot, bucket)
           DO UPDATE SET count = {s}.lateness.count + excluded.count),
         {tally}
         SELECT (SELECT now FROM t),
           least(
             (SELECT min(at_ms) FROM {jobs} WHERE queue = $1 AND state = 0
                AND id <> ALL (ARRAY(SELECT id FROM due))),
             (SELECT min(at_ms) FROM {jobs} WHERE queue = $1 AND state = 1
                AND id <> ALL (ARRAY(SELECT id FROM expired))),
             (SELECT min(at_ms) FROM claimed)),
           ARRAY(SELECT id FROM buried),
           c.id, c.payload, c.deadline_ms, c.attempts, c.token, c.expired,
           EXISTS (SELECT 1 FROM {jobs} WHERE queue = $1 AND chain AND state = 0
             AND at_ms <= (SELECT now FROM t))
         FROM t LEFT JOIN claimed AS c ON true
         ORDER BY c.expired DESC, c.deadline_ms, c.id"
    )
}
