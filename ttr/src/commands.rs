//! The shell commands: each reads or changes a queue through the
//! library's public API and prints text for a person (every user-supplied
//! string through [`safe`]) or, with `--json`, one JSON document.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tiered_timer_jobs::{
    find_queues, JobId, JobInfo, JobState, Listing, Page, Queue, RecurrenceInfo, Stats,
};

use crate::confirm::confirm;
use crate::human::{clock_name, relative};
use crate::text::{payload, safe, table};
use crate::{failure, human, Command, Confirm, Failure, ListArgs, RedisArgs, Target};

/// How to print.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub(crate) json: bool,
}

impl Output {
    pub(crate) fn print(self, text: impl FnOnce() -> String, json: impl FnOnce() -> Value) {
        if self.json {
            println!("{}", json());
        } else {
            print!("{}", text());
        }
    }
}

/// Runs a command on one queue.
pub(crate) async fn run(
    queue: &Queue,
    command: Command,
    redis: &RedisArgs,
    out: Output,
) -> Result<(), Failure> {
    let fail = |e| failure(&redis.url, e);
    let name = queue.name().to_owned();
    match command {
        Command::Stats { watch: None, .. } => {
            let stats = queue.stats().await.map_err(fail)?;
            out.print(
                || show_stats(&name, &stats, clock_name(&redis.url)),
                || stats_json(&name, &stats),
            );
        }
        Command::Stats {
            watch: Some(every), ..
        } => return watch(queue, every, redis, out).await,
        Command::Job { id, .. } => {
            let id = JobId::from(id);
            let Some(job) = queue.job(&id).await.map_err(fail)? else {
                if out.json {
                    println!(
                        "{}",
                        json!({"queue": name, "id": id.as_str(), "found": false})
                    );
                }
                return Err(Failure::Runtime(format!(
                    "{} is not in {name} (done, cancelled, purged or never scheduled)",
                    safe(id.as_str())
                )));
            };
            out.print(|| show_job(&name, &job), || job_json(&name, &job));
        }
        Command::Pending(args) => list(queue, Listing::Waiting, args, redis, out).await?,
        Command::Due(args) => list(queue, Listing::Due, args, redis, out).await?,
        Command::Leased(args) => list(queue, Listing::Leased, args, redis, out).await?,
        Command::Dead(args) => list(queue, Listing::Dead, args, redis, out).await?,
        Command::Requeue(target) => {
            act_on_dead(queue, "requeue", target, redis, out).await?;
        }
        Command::Purge(target) => {
            act_on_dead(queue, "purge", target, redis, out).await?;
        }
        Command::Cancel {
            id, confirm: asked, ..
        } => {
            let id = JobId::from(id);
            if !asked.yes {
                let Some(job) = queue.job(&id).await.map_err(fail)? else {
                    return one_action(out, &name, "cancel", &id, false, String::new(), "waiting");
                };
                if job.state != JobState::Waiting {
                    return one_action(out, &name, "cancel", &id, false, String::new(), "waiting");
                }
                let due = job
                    .due
                    .map(|due| format!(", due {},", relative(due, job.redis_time)))
                    .unwrap_or_default();
                let what = format!(
                    "cancel the waiting job {} of {name}{due} so that it is never delivered",
                    safe(id.as_str())
                );
                confirm(asked, "cancel", &what).await?;
            }
            let done = queue.cancel(&id).await.map_err(fail)?;
            let text = format!(
                "cancelled {} in {name}: it will never be delivered\n",
                safe(id.as_str())
            );
            one_action(out, &name, "cancel", &id, done, text, "waiting")?;
        }
        Command::Promote { id, .. } => {
            let id = JobId::from(id);
            let done = queue.promote(&id).await.map_err(fail)?;
            let text = format!("promoted {} in {name}: due now\n", safe(id.as_str()));
            one_action(out, &name, "promote", &id, done, text, "waiting")?;
        }
        Command::Recurrences { .. } => {
            let all = queue.recurrences().await.map_err(fail)?;
            let now = SystemTime::now();
            out.print(
                || show_recurrences(&name, &all, now),
                || recurrences_json(&name, &all),
            );
        }
        Command::PauseRecurrence { name: which, .. } => {
            let found = queue.pause_recurrence(&which).await.map_err(fail)?;
            let text = format!(
                "paused {} in {name}: its waiting occurrence is cancelled; \
                 `ttr resume-recurrence {name} <name>` resumes it\n",
                safe(&which)
            );
            recurrence_action(out, &name, "pause", &which, found, text)?;
        }
        Command::ResumeRecurrence { name: which, .. } => {
            let found = queue.resume_recurrence(&which).await.map_err(fail)?;
            let text = format!("resumed {} in {name}\n", safe(&which));
            recurrence_action(out, &name, "resume", &which, found, text)?;
        }
        Command::Queues | Command::Serve(_) | Command::Repair { .. } => {
            unreachable!("not a command on one queue")
        }
    }
    Ok(())
}

/// Prints the outcome of an action on one job; not done is exit status 1.
fn one_action(
    out: Output,
    queue: &str,
    action: &str,
    id: &JobId,
    done: bool,
    text: String,
    needs: &str,
) -> Result<(), Failure> {
    if out.json {
        println!(
            "{}",
            json!({"queue": queue, "action": action, "id": id.as_str(), "changed": done})
        );
    } else if done {
        print!("{text}");
    }
    if done {
        Ok(())
    } else {
        Err(Failure::Runtime(format!(
            "{} is not {needs} in {queue} (nothing changed; `ttr job {queue} <id>` shows where it is)",
            safe(id.as_str())
        )))
    }
}

async fn act_on_dead(
    queue: &Queue,
    action: &str,
    target: Target,
    redis: &RedisArgs,
    out: Output,
) -> Result<(), Failure> {
    let fail = |e| failure(&redis.url, e);
    let name = queue.name().to_owned();
    let requeue = action == "requeue";
    match target.id {
        None => {
            confirm_all(queue, requeue, target.confirm, redis).await?;
            let n = if requeue {
                queue.requeue_all().await
            } else {
                queue.purge_all().await
            }
            .map_err(fail)?;
            out.print(
                || {
                    if requeue {
                        format!("requeued {n} dead letter(s) of {name}: due now\n")
                    } else {
                        format!("purged {n} dead letter(s) of {name}\n")
                    }
                },
                || json!({"queue": name, "action": action, "all": true, "count": n}),
            );
            Ok(())
        }
        Some(id) => {
            let id = JobId::from(id);
            if !requeue && !target.confirm.yes {
                let dead = queue
                    .job(&id)
                    .await
                    .map_err(fail)?
                    .is_some_and(|job| job.state == JobState::Dead);
                if !dead {
                    return one_action(
                        out,
                        &name,
                        action,
                        &id,
                        false,
                        String::new(),
                        "a dead letter",
                    );
                }
                let what = format!(
                    "delete the dead letter {} of {name} for good",
                    safe(id.as_str())
                );
                confirm(target.confirm, "purge", &what).await?;
            }
            let done = if requeue {
                queue.requeue(&id).await
            } else {
                queue.purge(&id).await
            }
            .map_err(fail)?;
            let text = if requeue {
                format!(
                    "requeued {} in {name}: due now, attempts reset\n",
                    safe(id.as_str())
                )
            } else {
                format!("purged {} from {name}\n", safe(id.as_str()))
            };
            one_action(out, &name, action, &id, done, text, "a dead letter")
        }
    }
}

/// Asks before `requeue --all` or `purge --all`, saying how many dead
/// letters it would change (nothing to ask when there are none).
async fn confirm_all(
    queue: &Queue,
    requeue: bool,
    asked: Confirm,
    redis: &RedisArgs,
) -> Result<(), Failure> {
    if asked.yes {
        return Ok(());
    }
    let dead = queue
        .stats()
        .await
        .map_err(|e| failure(&redis.url, e))?
        .dead;
    if dead == 0 {
        return Ok(());
    }
    let name = queue.name();
    let (command, what) = if requeue {
        (
            "requeue --all",
            format!(
                "move all {dead} dead letter(s) of {name} back to the waiting jobs, due now, \
                 their attempts reset"
            ),
        )
    } else {
        (
            "purge --all",
            format!("delete all {dead} dead letter(s) of {name} for good"),
        )
    };
    confirm(asked, command, &what).await
}

async fn list(
    queue: &Queue,
    listing: Listing,
    args: ListArgs,
    redis: &RedisArgs,
    out: Output,
) -> Result<(), Failure> {
    let page = queue
        .list(listing, args.offset, args.limit as usize)
        .await
        .map_err(|e| failure(&redis.url, e))?;
    let name = queue.name().to_owned();
    out.print(
        || show_page(&name, listing, &page, queue.partitions() > 1),
        || page_json(&name, listing, &page),
    );
    Ok(())
}

async fn watch(
    queue: &Queue,
    every: Duration,
    redis: &RedisArgs,
    out: Output,
) -> Result<(), Failure> {
    let name = queue.name().to_owned();
    let clear = !out.json && std::io::stdout().is_terminal();
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        let stats = queue.stats().await.map_err(|e| failure(&redis.url, e))?;
        let mut stdout = std::io::stdout().lock();
        let printed = if out.json {
            writeln!(stdout, "{}", stats_json(&name, &stats))
        } else {
            let head = if clear { "\x1b[H\x1b[2J" } else { "" };
            writeln!(
                stdout,
                "{head}{}(every {}; Ctrl-C stops)",
                show_stats(&name, &stats, clock_name(&redis.url)),
                human::duration(every)
            )
        };
        if printed.and_then(|()| stdout.flush()).is_err() {
            return Ok(()); // the reader went away (a closed pipe)
        }
    }
}

/// `ttr queues`: every queue found, with its counts.
pub(crate) async fn queues(redis: &RedisArgs, out: Output) -> Result<(), Failure> {
    let found = find_queues(&redis.url, redis.cluster, redis.timeout)
        .await
        .map_err(|e| failure(&redis.url, e))?;
    let mut rows = vec![vec![
        "queue".to_owned(),
        "partitions".to_owned(),
        "pending".to_owned(),
        "due now".to_owned(),
        "most overdue".to_owned(),
        "leased".to_owned(),
        "expired".to_owned(),
        "dead".to_owned(),
    ]];
    let mut docs = Vec::new();
    for info in &found {
        // A registered queue's handle adopts its recorded count; one found
        // by its keys alone is opened with the count they show.
        let partitions = (!info.registered).then_some(info.partitions);
        let queue = crate::embedded::look_at(redis, &info.name, partitions).await?;
        let stats = queue.stats().await.map_err(|e| failure(&redis.url, e))?;
        rows.push(vec![
            safe(&info.name),
            info.partitions.to_string(),
            stats.pending.to_string(),
            stats.due_now.to_string(),
            overdue(&stats),
            stats.leased.to_string(),
            stats.expired_leases.to_string(),
            stats.dead.to_string(),
        ]);
        let mut doc = stats_json(&info.name, &stats);
        doc["registered"] = json!(info.registered);
        docs.push(doc);
    }
    out.print(
        || {
            if found.is_empty() && redis.url.starts_with("file://") {
                "no queues found in this store\n".to_owned()
            } else if found.is_empty() && crate::failure::is_postgres(&redis.url) {
                "no queues found in this Postgres schema\n".to_owned()
            } else if found.is_empty() {
                "no queues found on this Redis\n".to_owned()
            } else {
                table(&rows, &[false, true, true, true, true, true, true, true])
            }
        },
        || json!({ "queues": docs }),
    );
    Ok(())
}

fn overdue(stats: &Stats) -> String {
    if stats.due_now > 0 {
        human::duration(stats.overdue)
    } else {
        "-".to_owned()
    }
}

/// A time for JSON: RFC 3339 UTC to the millisecond.
fn time_json(time: Option<SystemTime>) -> Value {
    match time {
        Some(t) => json!(humantime::format_rfc3339_millis(t).to_string()),
        None => Value::Null,
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn stats_json(name: &str, stats: &Stats) -> Value {
    let one = |s: &Stats| {
        json!({
            "partition": s.partition,
            "redis_time": time_json(Some(s.redis_time)),
            "pending": s.pending,
            "due_now": s.due_now,
            "earliest_due": time_json(s.earliest_due),
            "overdue_ms": ms(s.overdue),
            "leased": s.leased,
            "expired_leases": s.expired_leases,
            "earliest_lease_expiry": time_json(s.earliest_lease_expiry),
            "dead": s.dead,
            "latest_death": time_json(s.latest_death),
        })
    };
    let mut doc = one(stats);
    doc["queue"] = json!(name);
    doc["partitions"] = json!(stats.partitions.iter().map(one).collect::<Vec<_>>());
    doc
}

fn job_json(name: &str, job: &JobInfo) -> Value {
    let text = std::str::from_utf8(&job.payload).ok();
    json!({
        "queue": name,
        "id": job.id.as_str(),
        "found": true,
        "partition": job.partition,
        "state": job.state.as_str(),
        "redis_time": time_json(Some(job.redis_time)),
        "due": time_json(job.due),
        "lease_expiry": time_json(job.lease_expiry),
        "died_at": time_json(job.died_at),
        "attempts": job.attempts,
        "last_error": job.last_error,
        "created": time_json(job.created),
        "holder": job.holder,
        "history": job.history.iter().map(|a| json!({
            "number": a.number,
            "claimed": time_json(Some(a.claimed)),
            "holder": a.holder,
            "outcome": a.outcome.as_str(),
            "ended": time_json(a.ended),
            "error": a.error,
        })).collect::<Vec<_>>(),
        "payload_len": job.payload.len(),
        "payload_text": text,
        "payload_hex": if text.is_none() { Some(hex(&job.payload)) } else { None },
    })
}

fn page_json(name: &str, listing: Listing, page: &Page) -> Value {
    let jobs: Vec<Value> = page
        .jobs
        .iter()
        .map(|j| {
            let text = std::str::from_utf8(&j.payload_preview).ok();
            json!({
                "id": j.id.as_str(),
                "partition": j.partition,
                "state": j.state.as_str(),
                "at": time_json(Some(j.at)),
                "attempts": j.attempts,
                "payload_len": j.payload_len,
                "payload_preview_text": text,
                "payload_preview_hex": if text.is_none() { Some(hex(&j.payload_preview)) } else { None },
                "last_error": j.last_error,
            })
        })
        .collect();
    json!({
        "queue": name,
        "listing": listing.as_str(),
        "redis_time": time_json(Some(page.redis_time)),
        "total": page.total,
        "offset": page.offset,
        "jobs": jobs,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The stats as text; `clock` says whose clock "now" is ([`clock_name`]).
pub(crate) fn show_stats(name: &str, stats: &Stats, clock: &str) -> String {
    let n = stats.partitions.len();
    let now = stats.redis_time;
    let mut out = format!(
        "queue {name} ({n} partition{}), {clock} {}\n\n",
        if n == 1 { "" } else { "s" },
        human::utc(now)
    );
    let pending_note = if stats.due_now > 0 {
        format!(
            "{} due now, the oldest {} overdue",
            stats.due_now,
            human::duration(stats.overdue)
        )
    } else if let Some(due) = stats.earliest_due {
        format!("none due yet; next due {}", relative(due, now))
    } else {
        "none".to_owned()
    };
    let leased_note = match stats.earliest_lease_expiry {
        Some(expiry) if stats.expired_leases > 0 => format!(
            "{} expired lease(s), the oldest {}, not reclaimed yet (worker gone?)",
            stats.expired_leases,
            relative(expiry, now)
        ),
        Some(expiry) => format!("next lease runs out {}", relative(expiry, now)),
        None => String::new(),
    };
    let dead_note = match stats.latest_death {
        Some(death) => format!(
            "latest died {}; see `ttr dead {name}`",
            relative(death, now)
        ),
        None => String::new(),
    };
    let width = [stats.pending, stats.leased, stats.dead]
        .iter()
        .map(|v| v.to_string().len())
        .max()
        .unwrap_or(1);
    for (label, value, note) in [
        ("pending", stats.pending, pending_note),
        ("leased", stats.leased, leased_note),
        ("dead", stats.dead, dead_note),
    ] {
        let line = format!("{label:<8} {value:>width$}   {note}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if n > 1 {
        out.push('\n');
        let mut rows = vec![vec![
            "partition".to_owned(),
            "pending".to_owned(),
            "due now".to_owned(),
            "most overdue".to_owned(),
            "leased".to_owned(),
            "expired".to_owned(),
            "dead".to_owned(),
        ]];
        for p in &stats.partitions {
            rows.push(vec![
                format!("{name}#{}", p.partition.unwrap_or(0)),
                p.pending.to_string(),
                p.due_now.to_string(),
                overdue(p),
                p.leased.to_string(),
                p.expired_leases.to_string(),
                p.dead.to_string(),
            ]);
        }
        out.push_str(&table(&rows, &[false, true, true, true, true, true, true]));
    }
    out
}

fn show_job(name: &str, job: &JobInfo) -> String {
    let now = job.redis_time;
    let at = |t: SystemTime| format!("{} ({})", human::utc(t), relative(t, now));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let state = match job.state {
        JobState::Waiting if job.due.is_some_and(|due| due <= now) => "waiting, due now".to_owned(),
        JobState::Leased if job.lease_expiry.is_some_and(|e| e <= now) => {
            "leased, lease expired (not reclaimed yet)".to_owned()
        }
        state => state.to_string(),
    };
    rows.push(vec!["state".into(), state]);
    if let Some(holder) = &job.holder {
        rows.push(vec!["held by".into(), safe(holder)]);
    }
    if let Some(created) = job.created {
        rows.push(vec!["created".into(), at(created)]);
    }
    if let Some(due) = job.due {
        rows.push(vec!["due".into(), at(due)]);
    }
    if let Some(expiry) = job.lease_expiry {
        rows.push(vec!["lease until".into(), at(expiry)]);
    }
    if let Some(died) = job.died_at {
        rows.push(vec!["died".into(), at(died)]);
    }
    rows.push(vec!["attempts".into(), job.attempts.to_string()]);
    rows.push(vec![
        "last error".into(),
        job.last_error.as_deref().map_or("-".to_owned(), safe),
    ]);
    rows.push(vec![
        "payload".into(),
        format!(
            "{}: {}",
            human::bytes(job.payload.len() as u64),
            payload(&job.payload, job.payload.len() as u64, 2000)
        ),
    ]);
    let mut out = format!(
        "job {} in {name} (partition {})\n\n{}",
        safe(job.id.as_str()),
        job.partition,
        table(&rows, &[false, false])
    );
    out.push_str(&show_history(job));
    out
}

/// A job's last attempts as a table (oldest first), or why there is none.
fn show_history(job: &JobInfo) -> String {
    if job.history.is_empty() {
        return if job.attempts == 0 {
            "\nnot delivered yet\n".to_owned()
        } else {
            "\nno attempt recorded (made before the store kept them)\n".to_owned()
        };
    }
    let now = job.redis_time;
    let mut rows = vec![["#", "claimed", "by", "outcome", "ended", "error"]
        .map(str::to_owned)
        .to_vec()];
    for a in &job.history {
        rows.push(vec![
            a.number.to_string(),
            relative(a.claimed, now),
            a.holder.as_deref().map_or("-".to_owned(), safe),
            a.outcome.to_string(),
            a.ended.map_or("-".to_owned(), |t| relative(t, now)),
            a.error.as_deref().map_or("-".to_owned(), safe),
        ]);
    }
    format!(
        "\nlast {} attempt(s), oldest first\n{}",
        job.history.len(),
        table(&rows, &[true, true, false, false, true, false])
    )
}

fn show_page(name: &str, listing: Listing, page: &Page, partitioned: bool) -> String {
    let what = match listing {
        Listing::Waiting => "waiting job(s)",
        Listing::Due => "due job(s)",
        Listing::Leased => "leased job(s)",
        Listing::Dead => "dead letter(s)",
    };
    if page.jobs.is_empty() {
        return if page.offset > 0 {
            format!(
                "no {what} past {} in {name} ({} in all)\n",
                page.offset, page.total
            )
        } else {
            format!("no {what} in {name}\n")
        };
    }
    let when = match listing {
        Listing::Waiting | Listing::Due => "due",
        Listing::Leased => "lease until",
        Listing::Dead => "died",
    };
    let mut rows = vec![vec![
        "id".to_owned(),
        "partition".to_owned(),
        "attempts".to_owned(),
        when.to_owned(),
        "payload".to_owned(),
        "last error".to_owned(),
    ]];
    for job in &page.jobs {
        rows.push(vec![
            safe(job.id.as_str()),
            job.partition.to_string(),
            job.attempts.to_string(),
            relative(job.at, page.redis_time),
            payload(&job.payload_preview, job.payload_len, 24),
            job.last_error.as_deref().map_or("-".to_owned(), safe),
        ]);
    }
    let mut right = vec![false, true, true, true, false, false];
    if !partitioned {
        for row in &mut rows {
            row.remove(1);
        }
        right.remove(1);
    }
    let mut out = table(&rows, &right);
    let hint = match listing {
        Listing::Dead => format!(
            " `ttr requeue {name} <id>|--all` retries, `ttr purge {name} <id>|--all` deletes."
        ),
        Listing::Waiting | Listing::Due => {
            format!(
                " `ttr promote {name} <id>` makes one due now, `ttr cancel {name} <id>` drops it."
            )
        }
        Listing::Leased => String::new(),
    };
    out.push_str(&format!(
        "\n{}-{} of {} {what} in {name}.{hint}\n",
        page.offset + 1,
        page.offset + page.jobs.len(),
        page.total,
    ));
    out
}

/// Prints the outcome of a pause or resume; no such recurrence is exit
/// status 1.
fn recurrence_action(
    out: Output,
    queue: &str,
    action: &str,
    name: &str,
    found: bool,
    text: String,
) -> Result<(), Failure> {
    if out.json {
        println!(
            "{}",
            json!({"queue": queue, "action": action, "recurrence": name, "found": found})
        );
    } else if found {
        print!("{text}");
    }
    if found {
        Ok(())
    } else {
        Err(Failure::Runtime(format!(
            "no recurrence named {} in {queue} (`ttr recurrences {queue}` lists them)",
            safe(name)
        )))
    }
}

fn recurrences_json(name: &str, all: &[RecurrenceInfo]) -> Value {
    let recurrences: Vec<Value> = all
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "spec": r.spec,
                "time_zone": r.time_zone,
                "missed": r.missed.to_string(),
                "paused": r.paused,
                "next": time_json(r.next),
                "last": time_json(r.last),
                "last_outcome": r.last_run.map(|l| l.as_str()),
                "last_error": r.last_error,
            })
        })
        .collect();
    json!({"queue": name, "recurrences": recurrences})
}

/// The recurrences as a table, times relative to this host's `now` (a
/// recurrence's times are instants; the store's clock decides them).
fn show_recurrences(name: &str, all: &[RecurrenceInfo], now: SystemTime) -> String {
    if all.is_empty() {
        return format!("no recurring jobs in {name}\n");
    }
    let mut rows = vec![[
        "name",
        "spec",
        "time zone",
        "missed",
        "next",
        "last",
        "last outcome",
    ]
    .map(str::to_owned)
    .to_vec()];
    for r in all {
        let next = match (r.paused, r.next) {
            (true, _) => "paused".to_owned(),
            (false, Some(next)) => format!("{} ({})", human::utc(next), relative(next, now)),
            (false, None) => "-".to_owned(),
        };
        let outcome = match (r.last_run, &r.last_error) {
            (Some(run), Some(error)) => format!("{run}: {}", safe(error)),
            (Some(run), None) => run.to_string(),
            (None, _) => "-".to_owned(),
        };
        rows.push(vec![
            safe(&r.name),
            safe(&r.spec),
            safe(&r.time_zone),
            r.missed.to_string(),
            next,
            r.last.map_or("-".to_owned(), |last| {
                format!("{} ({})", human::utc(last), relative(last, now))
            }),
            outcome,
        ]);
    }
    let mut out = table(&rows, &[false; 7]);
    out.push_str(&format!(
        "\n{} recurring job(s) in {name}. `ttr pause-recurrence {name} <name>` pauses one, \
         `ttr resume-recurrence {name} <name>` resumes it.\n",
        all.len()
    ));
    out
}
