//! The `ttr` binary, built by cargo and run as an operator would, against
//! a real redis-server (see the Redis crate's `tests/support`): its output
//! (text and `--json`) and exit status.

#[path = "../../tiered-timer-jobs/tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use support::{RedisCluster, RedisServer};
use tiered_timer_jobs::{JobId, Queue, Recurrence};

fn ttr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ttr"))
        .args(args)
        .env_remove("REDIS_URL")
        .output()
        .expect("run ttr")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The number after `label` at the start of a line of `ttr stats`.
fn count(text: &str, label: &str) -> u64 {
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some(label)).then(|| words.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(output)))
}

#[test]
fn help_version_and_bad_usage() {
    for args in [&["--help"][..], &["help"][..]] {
        let help = ttr(args);
        assert_eq!(help.status.code(), Some(0), "{args:?}");
        let text = stdout(&help);
        assert!(text.contains("Usage: ttr [OPTIONS] <COMMAND>"), "{text}");
        for command in [
            "stats", "job", "pending", "due", "leased", "dead", "cancel", "promote", "serve",
        ] {
            assert!(text.contains(&format!("  {command} ")), "{command}: {text}");
        }
    }
    let help = ttr(&["help", "stats"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("--watch"), "{}", stdout(&help));
    let version = ttr(&["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert_eq!(
        stdout(&version),
        format!("ttr {}\n", env!("CARGO_PKG_VERSION"))
    );

    for (args, says) in [
        (&[][..], "Usage"),
        (&["stats"][..], "<QUEUE>"),
        (&["frobnicate", "orders"][..], "unrecognized subcommand"),
        (&["stats", "orders", "--frob"][..], "--frob"),
        (
            &["stats", "orders", "--partitions", "zero"][..],
            "--partitions",
        ),
        (&["stats", "orders", "--timeout", "soon"][..], "--timeout"),
        (&["stats", "orders", "--timeout", "0s"][..], "above zero"),
        (&["requeue", "orders"][..], "required"),
        (
            &["purge", "orders", "a", "--all"][..],
            "cannot be used with",
        ),
        (&["dead", "orders", "--limit", "0"][..], "--limit"),
        (
            &["stats", "a{b", "--url", "redis://127.0.0.1:1/"][..],
            "invalid queue name",
        ),
        (
            &["stats", "orders", "--url", "nonsense://x"][..],
            "invalid --url",
        ),
    ] {
        let output = ttr(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("--help"),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
}

#[test]
fn a_redis_that_is_not_there_is_a_clear_error() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}/");
    let started = std::time::Instant::now();
    let output = ttr(&["--url", &url, "stats", "orders"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(&format!("cannot reach Redis at {url}")),
        "{message}"
    );
    assert!(message.to_lowercase().contains("refused"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "no waiting on a refusal"
    );
}

#[test]
fn a_redis_that_does_not_answer_is_a_clear_error_after_the_timeout() {
    let server = RedisServer::start();
    server.freeze(); // SIGSTOP: connections are accepted, nothing answered
    let started = std::time::Instant::now();
    let output = ttr(&[
        "--url",
        &server.url(),
        "--timeout",
        "500ms",
        "stats",
        "orders",
    ]);
    let took = started.elapsed();
    server.thaw();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("cannot reach Redis at"), "{message}");
    // The probe or the connection, whichever notices first, names the
    // timeout.
    assert!(
        message.contains("within") && message.contains("500ms"),
        "{message}"
    );
    assert!(took < Duration::from_secs(5), "gave up after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_dead_requeue_and_purge_on_a_real_queue() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "orders")
        .max_attempts(3)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    // Two jobs 200 s and 10 s overdue, one an hour out, and one buried
    // (the most overdue, so the first claimed).
    queue.schedule_at(at(t0 - 200_000), "late").await.unwrap();
    queue.schedule_at(at(t0 - 10_000), "late").await.unwrap();
    queue
        .schedule_at(at(t0 + 3_600_000), "later")
        .await
        .unwrap();
    queue
        .schedule_at(at(t0 - 500_000), "charge 17")
        .await
        .unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!(job.payload(), b"charge 17");
    let dead_id = job.id().clone();
    job.bury("card declined\nby the bank").await.unwrap();

    let output = ttr(&["--url", &url, "stats", "orders"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(count(&text, "pending"), 3, "{text}");
    assert_eq!(count(&text, "leased"), 0, "{text}");
    assert_eq!(count(&text, "dead"), 1, "{text}");
    assert!(
        text.starts_with("queue orders (1 partition), Redis time 20"),
        "{text}"
    );
    // 200 s is 3m 20s; the run takes well under 40 s more.
    assert!(text.contains("2 due now, the oldest 3m "), "{text}");
    assert!(text.contains("latest died "), "{text}");

    let output = ttr(&["--url", &url, "dead", "orders"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("id "), "{text}");
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns,
        ["id", "attempts", "died", "payload", "last", "error"]
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with(dead_id.as_str()), "{text}");
    // The newline in the reason is shown escaped, on the row's one line.
    assert!(
        row.ends_with("ago  charge 17  card declined\\nby the bank"),
        "{text}"
    );
    // Columns line up: the error starts where its header does.
    assert_eq!(
        header.find("last error"),
        row.find("card declined"),
        "{text}"
    );
    assert!(text.contains("1-1 of 1 dead letter(s) in orders"), "{text}");

    let output = ttr(&["--url", &url, "requeue", "orders", "no-such-job"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no-such-job is not a dead letter in orders"));

    let output = ttr(&["--url", &url, "requeue", "orders", dead_id.as_str()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("requeued"));
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (4, 0));

    let output = ttr(&["--url", &url, "dead", "orders"]);
    assert_eq!(stdout(&output), "no dead letter(s) in orders\n");

    // Two more dead letters, then purge one and all.
    for reason in ["first", "second"] {
        let job = queue.next().await.unwrap();
        job.bury(reason).await.unwrap();
    }
    let dead = queue.dead_letters(10).await.unwrap();
    let output = ttr(&[
        "--url",
        &url,
        "purge",
        "orders",
        dead[0].id.as_str(),
        "--yes",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = ttr(&["--url", &url, "purge", "orders", "--all", "--yes"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "purged 1 dead letter(s) of orders\n");
    assert_eq!(queue.stats().await.unwrap().dead, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_per_partition_and_requeue_all() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "mail")
        .partitions(3)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..30).map(|i| (Duration::ZERO, format!("mail {i}"))))
        .await
        .unwrap();
    for _ in 0..5 {
        queue.next().await.unwrap().bury("bounced").await.unwrap();
    }
    let output = ttr(&["--url", &url, "--partitions", "3", "stats", "mail"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(count(&text, "pending"), 25, "{text}");
    assert_eq!(count(&text, "dead"), 5, "{text}");
    let stats = queue.stats().await.unwrap();
    for p in &stats.partitions {
        let name = format!("mail#{}", p.partition.unwrap());
        let row = text
            .lines()
            .find(|l| l.starts_with(&name))
            .unwrap_or_else(|| panic!("no row {name}:\n{text}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], p.pending.to_string(), "{row}");
        assert_eq!(cells.last().unwrap(), &p.dead.to_string(), "{row}");
    }

    // Without --partitions: the queue's recorded count, the same rows.
    let adopted = ttr(&["--url", &url, "stats", "mail"]);
    assert_eq!(adopted.status.code(), Some(0), "{}", stderr(&adopted));
    let adopted = stdout(&adopted);
    assert_eq!(
        (count(&adopted, "pending"), count(&adopted, "dead")),
        (25, 5),
        "{adopted}"
    );
    assert_eq!(
        adopted.lines().filter(|l| l.starts_with("mail#")).count(),
        3,
        "{adopted}"
    );
    let output = ttr(&["--url", &url, "dead", "mail"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("1-5 of 5 dead letter(s) in mail"));
    // Another count is still an error that says both numbers, in ttr's
    // words.
    let output = ttr(&["--url", &url, "--partitions", "2", "stats", "mail"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(
        message.contains("has 3 partition(s), not 2")
            && message.contains("--partitions 3")
            && !message.contains("cannot reach")
            && !message.contains("partitions("),
        "{message}"
    );

    let output = ttr(&[
        "--url",
        &url,
        "--partitions=3",
        "requeue",
        "mail",
        "--all",
        "--yes",
    ]);
    assert_eq!(
        stdout(&output),
        "requeued 5 dead letter(s) of mail: due now\n"
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (30, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_with_partitions_over_its_nodes() {
    let cluster = RedisCluster::start(3);
    let url = cluster.url();
    let queue = Queue::builder(&url, "orders")
        .cluster()
        .partitions(6)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_many((0..60).map(|i| (Duration::from_secs(3600 + i), "later")))
        .await
        .unwrap();
    queue
        .schedule_many((0..6).map(|_| (Duration::ZERO, "now")))
        .await
        .unwrap();
    for reason in ["one", "two", "three"] {
        let job = tokio::time::timeout(Duration::from_secs(20), queue.next())
            .await
            .unwrap()
            .unwrap();
        job.bury(reason).await.unwrap();
    }
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (63, 3));

    let output = ttr(&[
        "--url",
        &url,
        "--cluster",
        "--partitions",
        "6",
        "stats",
        "orders",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(count(&text, "pending"), 63, "{text}");
    assert_eq!(count(&text, "dead"), 3, "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("orders#")).count(),
        6,
        "{text}"
    );

    let output = ttr(&[
        "--url",
        &url,
        "--cluster",
        "--partitions",
        "6",
        "dead",
        "orders",
    ]);
    let text = stdout(&output);
    assert!(text.contains("1-3 of 3 dead letter(s) in orders"), "{text}");
    for reason in ["one", "two", "three"] {
        assert!(
            text.lines().any(|l| l.ends_with(&format!("  {reason}"))),
            "{text}"
        );
    }

    let output = ttr(&[
        "--url",
        &url,
        "--cluster",
        "--partitions",
        "6",
        "requeue",
        "orders",
        "--all",
        "--yes",
    ]);
    assert_eq!(
        stdout(&output),
        "requeued 3 dead letter(s) of orders: due now\n"
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (66, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_on_every_command_parses() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "orders")
        .max_attempts(3)
        .connect()
        .await
        .unwrap();
    let t0 = server.now_ms().await;
    let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    queue.schedule_at(at(t0 - 90_000), "late").await.unwrap();
    queue
        .schedule_with_id("later", Duration::from_secs(3600), vec![0xff, 0x00])
        .await
        .unwrap();
    let dead = queue.schedule_at(at(t0 - 100_000), "doomed").await.unwrap();
    let job = queue.next().await.unwrap();
    assert_eq!(job.id(), &dead);
    job.bury("card declined").await.unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--url", url.as_str(), "--json"];
        all.extend_from_slice(args);
        let output = ttr(&all);
        (output.status.code(), json(&output))
    };

    let (code, stats) = run(&["stats", "orders"]);
    assert_eq!(code, Some(0));
    assert_eq!(stats["queue"], "orders");
    assert_eq!(
        (
            stats["pending"].as_u64(),
            stats["due_now"].as_u64(),
            stats["dead"].as_u64()
        ),
        (Some(2), Some(1), Some(1))
    );
    assert!(stats["overdue_ms"].as_u64().unwrap() >= 90_000, "{stats}");
    assert_eq!(stats["partitions"].as_array().unwrap().len(), 1);

    let (code, job) = run(&["job", "orders", "later"]);
    assert_eq!(code, Some(0));
    assert_eq!(job["state"], "waiting");
    assert_eq!(job["payload_hex"], "ff00");
    assert_eq!(job["payload_text"], Value::Null);
    assert!(job["due"].as_str().unwrap().ends_with('Z'), "{job}");

    let (code, missing) = run(&["job", "orders", "nope"]);
    assert_eq!((code, &missing["found"]), (Some(1), &Value::Bool(false)));

    let (_, pending) = run(&["pending", "orders"]);
    assert_eq!(pending["total"], 2);
    let ids: Vec<&str> = pending["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.last(), Some(&"later"));
    let (_, due) = run(&["due", "orders"]);
    assert_eq!(due["total"], 1);
    assert_eq!(due["jobs"][0]["payload_preview_text"], "late");
    let (_, dead_list) = run(&["dead", "orders"]);
    assert_eq!(dead_list["jobs"][0]["last_error"], "card declined");
    let (_, leased) = run(&["leased", "orders"]);
    assert_eq!(leased["total"], 0);

    let (code, promoted) = run(&["promote", "orders", "later"]);
    assert_eq!((code, &promoted["changed"]), (Some(0), &Value::Bool(true)));
    let (code, requeued) = run(&["requeue", "orders", dead.as_str()]);
    assert_eq!((code, &requeued["changed"]), (Some(0), &Value::Bool(true)));
    let (code, purged) = run(&["purge", "orders", "--all"]);
    assert_eq!((code, purged["count"].as_u64()), (Some(0), Some(0)));
    let (code, cancelled) = run(&["cancel", "orders", "nope"]);
    assert_eq!(
        (code, &cancelled["changed"]),
        (Some(1), &Value::Bool(false))
    );

    let (code, queues) = run(&["queues"]);
    assert_eq!(code, Some(0));
    assert_eq!(queues["queues"][0]["queue"], "orders");
    assert_eq!(queues["queues"][0]["pending"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_and_errors_cannot_drive_the_terminal() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::connect(&url, "orders").await.unwrap();
    let evil = "evil\x1b[2J\x1b]0;pwned\x07";
    queue
        .schedule_with_id(evil, Duration::ZERO, "x\x1b[31m")
        .await
        .unwrap();
    queue
        .schedule_with_id("日本語", Duration::ZERO, "wide")
        .await
        .unwrap();
    for _ in 0..2 {
        let job = queue.next().await.unwrap();
        let reason = format!("boom\x1b[1A\r{}", job.id());
        job.bury(reason).await.unwrap();
    }
    for args in [
        vec!["dead", "orders"],
        vec!["job", "orders", evil],
        vec!["stats", "orders"],
    ] {
        let mut all = vec!["--url", url.as_str()];
        all.extend(args.iter().copied());
        let output = ttr(&all);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        let text = stdout(&output);
        assert!(
            !text.bytes().any(|b| b < 0x20 && b != b'\n') && !text.contains('\u{7f}'),
            "{args:?} printed a control character: {text:?}"
        );
        if args[0] != "stats" {
            assert!(
                text.contains(r"evil\e[2J\e]0;pwned\u{7}"),
                "{args:?}: {text}"
            );
        }
    }
    // Wide characters are aligned by display width: each row's payload
    // column starts at the same display column as the header's.
    let text = stdout(&ttr(&["--url", &url, "dead", "orders"]));
    let column = |line: &str, what: &str| {
        use unicode_width::UnicodeWidthStr;
        line.find(what).map(|at| line[..at].width())
    };
    let lines: Vec<&str> = text.lines().collect();
    let header = column(lines[0], "payload").unwrap();
    let wide = lines.iter().find(|l| l.starts_with("日本語")).unwrap();
    assert_eq!(column(wide, "wide"), Some(header), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_inspected_listed_cancelled_and_promoted() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::connect(&url, "orders").await.unwrap();
    queue
        .schedule_with_id("a", Duration::from_secs(3600), "first")
        .await
        .unwrap();
    queue
        .schedule_with_id("b", Duration::from_secs(7200), "second")
        .await
        .unwrap();
    let cli = |args: &[&str]| {
        let mut all = vec!["--url", url.as_str()];
        all.extend_from_slice(args);
        ttr(&all)
    };
    let output = cli(&["job", "orders", "a"]);
    let text = stdout(&output);
    assert!(text.starts_with("job a in orders (partition 0)"), "{text}");
    assert!(text.contains("state       waiting\n"), "{text}");
    assert!(text.contains("(in 59m"), "{text}");
    assert!(text.contains("payload     5 B: first"), "{text}");

    let text = stdout(&cli(&["pending", "orders", "--limit", "1"]));
    assert!(text.lines().nth(1).unwrap().starts_with("a "), "{text}");
    assert!(text.contains("1-1 of 2 waiting job(s) in orders"), "{text}");
    let text = stdout(&cli(&[
        "pending", "orders", "--limit", "1", "--offset", "1",
    ]));
    assert!(text.lines().nth(1).unwrap().starts_with("b "), "{text}");

    let output = cli(&["promote", "orders", "b"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "promoted b in orders: due now\n");
    let text = stdout(&cli(&["due", "orders"]));
    assert!(text.lines().nth(1).unwrap().starts_with("b "), "{text}");
    let job = tokio::time::timeout(Duration::from_secs(10), queue.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.id(), &JobId::from("b"));
    let text = stdout(&cli(&["leased", "orders"]));
    assert!(text.lines().nth(1).unwrap().starts_with("b "), "{text}");
    assert!(
        text.contains(" in 29s") || text.contains(" in 30s"),
        "{text}"
    );
    let output = cli(&["cancel", "orders", "b"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a leased job is not cancelled"
    );
    assert!(
        stderr(&output).contains("b is not waiting in orders"),
        "{}",
        stderr(&output)
    );
    let output = cli(&["cancel", "orders", "a", "--yes"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(queue.job(&JobId::from("a")).await.unwrap(), None);
    let output = cli(&["job", "orders", "a"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("a is not in orders"),
        "{}",
        stderr(&output)
    );
}

/// `ttr job` tells a job's attempts: who held each, how it ended and with
/// what error, and who holds it now; `--json` has them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_prints_its_attempts_and_its_holder() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "orders")
        .holder("billing-7")
        .connect()
        .await
        .unwrap();
    queue
        .schedule_with_id("order-710", Duration::ZERO, "charge")
        .await
        .unwrap();
    let next = || async {
        tokio::time::timeout(Duration::from_secs(10), queue.next())
            .await
            .unwrap()
            .unwrap()
    };
    next()
        .await
        .retry_after_with_reason(Duration::ZERO, "card declined: <insufficient funds>")
        .await
        .unwrap();
    let _held = next().await;
    let text = stdout(&ttr(&["--url", &url, "job", "orders", "order-710"]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("held by ") && l.ends_with(" billing-7")),
        "{text}"
    );
    assert!(text.contains("created "), "{text}");
    assert!(text.contains("last 2 attempt(s), oldest first"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("last 2"))
        .skip(2)
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].starts_with("1 "), "{text}");
    assert!(rows[0].contains("billing-7  failed"), "{text}");
    assert!(
        rows[0].ends_with("card declined: <insufficient funds>"),
        "{text}"
    );
    assert!(rows[1].contains("billing-7  running "), "{text}");
    assert!(rows[1].ends_with(" -  -"), "no end, no error: {text}");

    let json: serde_json::Value = serde_json::from_str(&stdout(&ttr(&[
        "--url",
        &url,
        "--json",
        "job",
        "orders",
        "order-710",
    ])))
    .unwrap();
    assert_eq!(json["holder"], "billing-7");
    assert!(json["created"].is_string(), "{json}");
    let history = json["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0]["outcome"], "failed");
    assert_eq!(history[0]["number"], 1);
    assert_eq!(history[0]["error"], "card declined: <insufficient funds>");
    assert!(history[0]["ended"].is_string());
    assert_eq!(history[1]["outcome"], "running");
    assert!(history[1]["ended"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_watch_prints_every_interval() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::connect(&url, "orders").await.unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ttr"))
        .args([
            "--url", &url, "--json", "stats", "orders", "--watch", "200ms",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["pending"], 0);
    queue.schedule(Duration::from_secs(60), "x").await.unwrap();
    // Within a few updates the new job shows.
    let mut seen = false;
    for _ in 0..25 {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        if line["pending"] == 1 {
            seen = true;
            break;
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(seen, "the watch never showed the new job");
}

// `--timeout` is honoured when connecting too: redis-rs' own connection
// timeout (1 s) used to make `--timeout 10s` give up after one second.
#[test]
fn the_timeout_is_honoured_when_connecting() {
    let silent = support::SilentServer::start();
    let started = std::time::Instant::now();
    let output = ttr(&["--url", &silent.url(), "--timeout", "3s", "stats", "orders"]);
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("within") && message.contains("3s"),
        "{message}"
    );
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(10),
        "gave up after {took:?}"
    );
}

/// `ttr --url file:///...` on an embedded store: the same commands. Looks
/// work while the service that owns the store holds it (they open it
/// read-only, without its lock); changes need the service stopped (one
/// process per store) and say so while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_embedded_store() {
    let dir = support::backend::TempDir::new("ttr-cli");
    let url = format!("file://{}", dir.0.display());
    let queue = Queue::builder(&url, "orders")
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_with_id("later", Duration::from_secs(3600), b"wait".to_vec())
        .await
        .unwrap();
    queue
        .schedule_with_id("bad", Duration::ZERO, b"boom".to_vec())
        .await
        .unwrap();
    queue
        .next()
        .await
        .unwrap()
        .bury("no such order")
        .await
        .unwrap();

    // Held by this process: looks work, changes are refused.
    let held = ttr(&["--url", &url, "stats", "orders"]);
    assert!(held.status.success(), "{}", stderr(&held));
    let text = stdout(&held);
    assert_eq!(
        (count(&text, "pending"), count(&text, "dead")),
        (1, 1),
        "{text}"
    );
    let queues = ttr(&["--url", &url, "queues"]);
    assert!(queues.status.success(), "{}", stderr(&queues));
    assert!(
        stdout(&queues).lines().any(|l| l.starts_with("orders ")),
        "{}",
        stdout(&queues)
    );
    let change = ttr(&["--url", &url, "requeue", "orders", "bad"]);
    assert_eq!(change.status.code(), Some(1), "{}", stderr(&change));
    assert!(
        stderr(&change).contains("open in another process"),
        "{}",
        stderr(&change)
    );
    // What the service does next, the next look sees.
    queue
        .schedule_with_id("more", Duration::from_secs(3600), b"m".to_vec())
        .await
        .unwrap();
    let text = stdout(&ttr(&["--url", &url, "stats", "orders"]));
    assert_eq!(count(&text, "pending"), 2, "{text}");
    queue.cancel(&JobId::from("more")).await.unwrap();
    drop(queue);

    let mut stats = ttr(&["--url", &url, "stats", "orders"]);
    for _ in 0..50 {
        if stats.status.success() {
            break;
        }
        // The store closes once its last handle's last frame is written.
        tokio::time::sleep(Duration::from_millis(20)).await;
        stats = ttr(&["--url", &url, "stats", "orders"]);
    }
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stdout(&stats);
    assert_eq!(
        (count(&text, "pending"), count(&text, "dead")),
        (1, 1),
        "{text}"
    );
    // Its clock is the host's, not Redis'.
    assert!(
        text.starts_with("queue orders (1 partition), host time 20"),
        "{text}"
    );

    let queues = stdout(&ttr(&["--url", &url, "queues"]));
    assert!(queues.lines().any(|l| l.starts_with("orders ")), "{queues}");
    let dead = stdout(&ttr(&["--url", &url, "dead", "orders"]));
    assert!(
        dead.contains("bad") && dead.contains("no such order"),
        "{dead}"
    );
    let job = stdout(&ttr(&["--url", &url, "job", "orders", "later"]));
    assert!(job.contains("waiting"), "{job}");
    let pending = stdout(&ttr(&["--url", &url, "pending", "orders"]));
    assert!(pending.contains("later"), "{pending}");
    let mut requeue = ttr(&["--url", &url, "requeue", "orders", "bad"]);
    for _ in 0..50 {
        if requeue.status.success() {
            break;
        }
        // The store closes once its last handle's last frame is written.
        tokio::time::sleep(Duration::from_millis(20)).await;
        requeue = ttr(&["--url", &url, "requeue", "orders", "bad"]);
    }
    assert!(requeue.status.success(), "{}", stderr(&requeue));
    let stats = stdout(&ttr(&["--url", &url, "stats", "orders"]));
    assert_eq!(
        (count(&stats, "pending"), count(&stats, "dead")),
        (2, 0),
        "{stats}"
    );
    // Redis-only flags are usage errors here.
    let partitions = ttr(&["--url", &url, "--partitions", "3", "stats", "orders"]);
    assert_eq!(partitions.status.code(), Some(2), "{}", stderr(&partitions));
}

/// Every look and change on a Postgres queue, by its public API; a look
/// at a queue that is not there writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    let server = support::postgres::PostgresServer::start();
    let url = format!("{}?schema=ops", server.url());
    let holder = "pg-worker";
    // A look first: no queue, no schema created.
    let missing = ttr(&["--url", &url, "stats", "orders"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no queue named orders"),
        "{}",
        stderr(&missing)
    );
    let empty = ttr(&["--url", &url, "queues"]);
    assert!(empty.status.success(), "{}", stderr(&empty));
    assert!(stdout(&empty).contains("no queues found in this Postgres schema"));
    assert_eq!(
        server
            .number("SELECT count(*) FROM pg_namespace WHERE nspname = 'ops'")
            .await,
        0,
        "a look created the schema"
    );

    let queue = Queue::builder(&url, "orders")
        .max_attempts(1)
        .holder(holder)
        .connect()
        .await
        .unwrap();
    queue
        .schedule_with_id("later", Duration::from_secs(3600), b"wait".to_vec())
        .await
        .unwrap();
    queue
        .schedule_with_id("bad", Duration::ZERO, b"boom".to_vec())
        .await
        .unwrap();
    queue
        .next()
        .await
        .unwrap()
        .bury("no such order")
        .await
        .unwrap();

    let stats = ttr(&["--url", &url, "stats", "orders"]);
    assert!(stats.status.success(), "{}", stderr(&stats));
    let text = stdout(&stats);
    assert_eq!(
        (count(&text, "pending"), count(&text, "dead")),
        (1, 1),
        "{text}"
    );
    assert!(
        text.starts_with("queue orders (1 partition), Postgres time 20"),
        "{text}"
    );
    let queues = stdout(&ttr(&["--url", &url, "queues"]));
    assert!(queues.lines().any(|l| l.starts_with("orders ")), "{queues}");
    let dead = stdout(&ttr(&["--url", &url, "dead", "orders"]));
    assert!(
        dead.contains("bad") && dead.contains("no such order"),
        "{dead}"
    );
    let job = stdout(&ttr(&["--url", &url, "job", "orders", "later"]));
    assert!(job.contains("waiting"), "{job}");
    // The dead letter's history, as Postgres kept it.
    let bad = stdout(&ttr(&["--url", &url, "job", "orders", "bad"]));
    assert!(
        bad.contains("buried") && bad.contains(holder) && bad.contains("no such order"),
        "{bad}"
    );
    let pending = stdout(&ttr(&["--url", &url, "pending", "orders"]));
    assert!(pending.contains("later"), "{pending}");
    let requeue = ttr(&["--url", &url, "requeue", "orders", "bad"]);
    assert!(requeue.status.success(), "{}", stderr(&requeue));
    let promote = ttr(&["--url", &url, "promote", "orders", "later"]);
    assert!(promote.status.success(), "{}", stderr(&promote));
    let text = stdout(&ttr(&["--url", &url, "stats", "orders"]));
    assert_eq!(
        (count(&text, "pending"), count(&text, "dead")),
        (2, 0),
        "{text}"
    );
    let json = json(&ttr(&["--url", &url, "--json", "stats", "orders"]));
    assert_eq!(json["pending"], 2, "{json}");
    // Redis-only flags are usage errors here.
    let partitions = ttr(&["--url", &url, "--partitions", "3", "stats", "orders"]);
    assert_eq!(partitions.status.code(), Some(2), "{}", stderr(&partitions));
    assert!(
        stderr(&partitions).contains("a Postgres store has no partitions"),
        "{}",
        stderr(&partitions)
    );
    // A Postgres that is not there: a clear error, at once.
    drop(queue);
    drop(server);
    let gone = ttr(&["--url", &url, "stats", "orders"]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        stderr(&gone).contains("cannot reach Postgres at postgres://"),
        "{}",
        stderr(&gone)
    );
}

/// A misspelled queue is an error that says so (as `ttr job` says a job
/// is not there), on every command and both backends, and writes nothing;
/// a registered queue with no jobs is a queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_that_does_not_exist_is_an_error_and_an_empty_one_is_not() {
    let server = RedisServer::start();
    let url = server.url();
    Queue::connect(&url, "orders").await.unwrap();
    let dir = support::backend::TempDir::new("ttr-no-such-queue");
    let store = format!("file://{}", dir.0.display());
    drop(Queue::connect(&store, "orders").await.unwrap());

    for url in [url.as_str(), store.as_str()] {
        for args in [
            &["stats", "ordres"][..],
            &["pending", "ordres"],
            &["due", "ordres"],
            &["leased", "ordres"],
            &["dead", "ordres"],
            &["job", "ordres", "a"],
            &["cancel", "ordres", "a", "--yes"],
            &["promote", "ordres", "a"],
            &["requeue", "ordres", "--all", "--yes"],
            &["purge", "ordres", "--all", "--yes"],
        ] {
            let mut all = vec!["--url", url];
            all.extend_from_slice(args);
            let output = ttr(&all);
            assert_eq!(
                output.status.code(),
                Some(1),
                "{args:?}: {}",
                stdout(&output)
            );
            assert!(
                stderr(&output).contains(&format!("no queue named ordres at {url}")),
                "{args:?}: {}",
                stderr(&output)
            );
            assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
            assert!(
                !stderr(&output).contains("register("),
                "{}",
                stderr(&output)
            );
        }
        let mut all = vec!["--url", url, "--json", "stats", "ordres"];
        let output = ttr(&all);
        assert_eq!(output.status.code(), Some(1));
        assert!(stdout(&output).is_empty(), "{}", stdout(&output));
        let error: Value = serde_json::from_slice(&output.stderr).unwrap();
        assert_eq!(error["error"]["kind"], "no_such_queue", "{error}");
        assert_eq!(error["error"]["status"], 1, "{error}");

        all.truncate(2);
        all.extend(["stats", "orders"]);
        let output = ttr(&all);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(count(&stdout(&output), "pending"), 0);
    }
    // Nothing was written for the misspelled name.
    assert_eq!(server.cli(&["HGET", "ttr:queues", "ordres"]).trim(), "");
    assert_eq!(server.cli(&["KEYS", "*ordres*"]).trim(), "");
    assert!(!dir.0.join("ordres.log").exists());
}

/// The commands that delete jobs or change many (`purge`, `cancel`,
/// `requeue --all`) ask on a terminal, saying what they will do, and
/// refuse without `--yes` when nobody can answer; the others do not ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destructive_commands_ask_on_a_terminal_and_need_yes_in_scripts() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "orders")
        .max_attempts(1)
        .connect()
        .await
        .unwrap();
    for i in 0..3 {
        queue
            .schedule_with_id(format!("dead-{i}"), Duration::ZERO, "x")
            .await
            .unwrap();
        queue.next().await.unwrap().bury("declined").await.unwrap();
    }
    queue
        .schedule_with_id("waiting", Duration::from_secs(3600), "x")
        .await
        .unwrap();
    let counts = || async {
        let stats = queue.stats().await.unwrap();
        (stats.pending, stats.dead)
    };

    // No terminal (these tests' stdin is not one), no --yes: refused.
    for (args, says) in [
        (
            &["purge", "orders", "--all"][..],
            "delete all 3 dead letter(s) of orders",
        ),
        (
            &["purge", "orders", "dead-0"],
            "delete the dead letter dead-0 of orders",
        ),
        (
            &["requeue", "orders", "--all"],
            "move all 3 dead letter(s) of orders",
        ),
        (
            &["cancel", "orders", "waiting"],
            "cancel the waiting job waiting of orders",
        ),
    ] {
        let mut all = vec!["--url", url.as_str()];
        all.extend_from_slice(args);
        let output = ttr(&all);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stdout(&output)
        );
        let message = stderr(&output);
        assert!(message.contains(says), "{args:?}: {message}");
        assert!(
            message.contains("--yes") && message.contains("nothing changed"),
            "{message}"
        );
        assert_eq!(counts().await, (1, 3), "{args:?} changed something");
    }
    // With --json the refusal is JSON too.
    let output = ttr(&["--url", &url, "--json", "purge", "orders", "--all"]);
    let error: Value = serde_json::from_slice(&output.stderr).unwrap();
    assert_eq!(
        (error["error"]["kind"].as_str(), output.status.code()),
        (Some("usage"), Some(2))
    );

    // On a terminal: a question on stderr, with the count; "n" (or just
    // Enter) changes nothing, "y" does it.
    for answer in ["n", ""] {
        let (code, screen) = on_a_terminal(&url, "purge orders --all", answer);
        assert_eq!(code, Some(1), "{screen}");
        assert!(
            screen.contains(
                "This will delete all 3 dead letter(s) of orders for good. Continue? [y/N]"
            ),
            "{screen}"
        );
        assert!(screen.contains("nothing changed"), "{screen}");
        assert_eq!(counts().await, (1, 3));
    }
    let (code, screen) = on_a_terminal(&url, "purge orders --all", "y");
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains("purged 3 dead letter(s) of orders"),
        "{screen}"
    );
    assert_eq!(counts().await, (1, 0));
    let (code, screen) = on_a_terminal(&url, "cancel orders waiting", "yes");
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("due in 59m"), "{screen}");
    assert_eq!(counts().await, (0, 0));

    // --yes does it without asking; requeue and promote of one job never ask.
    queue
        .schedule_with_id("again", Duration::ZERO, "x")
        .await
        .unwrap();
    queue.next().await.unwrap().bury("declined").await.unwrap();
    let output = ttr(&["--url", &url, "requeue", "orders", "again"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = ttr(&["--url", &url, "promote", "orders", "again"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = ttr(&["--url", &url, "cancel", "orders", "again", "-y"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(counts().await, (0, 0));
}

/// Runs `ttr --url URL <command>` on a pseudo-terminal (util-linux'
/// `script`), typing `answer` and Enter: its exit status and the screen.
fn on_a_terminal(url: &str, command: &str, answer: &str) -> (Option<i32>, String) {
    use std::io::Write;
    let line = format!("{} --url {url} {command}", env!("CARGO_BIN_EXE_ttr"));
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env_remove("REDIS_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run script (util-linux)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{answer}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (output.status.code(), stdout(&output).replace('\r', ""))
}

/// Errors say what happened in words: the schemes `--url` takes, a
/// server that is not Redis, no password repeated, none of the library's
/// calls; `--json` errors are JSON on stderr.
#[test]
fn errors_are_sentences_for_people_and_json_with_json() {
    let http = support::HttpServer::start();
    let refused = format!("redis://:hunter2@127.0.0.1:{}/", support::closed_port());
    for (args, code, says, kind) in [
        (
            &["--url", "http://localhost/", "stats", "orders"][..],
            2,
            "http:// is not a job store; use file:///",
            "usage",
        ),
        (
            &["--url", "file://", "stats", "orders"],
            2,
            "file:// needs the store's directory",
            "usage",
        ),
        (
            &["--url", &http.url(), "stats", "orders"],
            1,
            "does not speak the Redis protocol",
            "not_redis",
        ),
        (
            &["--url", &http.url(), "queues"],
            1,
            "does not speak the Redis protocol",
            "not_redis",
        ),
        (
            &["--url", &http.url(), "serve", "--listen", "127.0.0.1:0"],
            1,
            "does not speak the Redis protocol",
            "not_redis",
        ),
        (
            &["--url", &refused, "stats", "orders"],
            1,
            "cannot reach Redis at redis://***@127.0.0.1:",
            "unreachable",
        ),
    ] {
        let output = ttr(args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {message}");
        assert!(message.contains(says), "{args:?}: {message}");
        for library_words in [
            "Parse error",
            "Unexpected",
            "InvalidClientConfig",
            "hunter2",
            "Redis URL",
        ] {
            assert!(!message.contains(library_words), "{args:?}: {message}");
        }

        let mut json = vec!["--json"];
        json.extend_from_slice(args);
        let output = ttr(&json);
        assert_eq!(output.status.code(), Some(code), "{json:?}");
        assert!(stdout(&output).is_empty(), "{json:?}: {}", stdout(&output));
        let error: Value = serde_json::from_slice(&output.stderr)
            .unwrap_or_else(|e| panic!("{json:?}: not JSON ({e}): {}", stderr(&output)));
        assert_eq!(error["error"]["kind"], kind, "{error}");
        assert_eq!(error["error"]["status"], code, "{error}");
        assert!(
            error["error"]["message"].as_str().unwrap().contains(says),
            "{error}"
        );
    }
    // clap's own usage errors too.
    let output = ttr(&["--json", "stats"]);
    assert_eq!(output.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&output.stderr).unwrap();
    assert_eq!(error["error"]["kind"], "usage");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("<QUEUE>"),
        "{error}"
    );

    // The help says "store" where either backend is meant.
    let help = stdout(&ttr(&["--help"]));
    assert!(help.contains("Every queue in the store"), "{help}");
    assert!(help.contains("1 the store cannot be reached"), "{help}");
    assert!(!help.contains("Redis unreachable"), "{help}");
    assert!(help.contains("file:///"), "{help}");
}

/// Issue 33's case: a copy of a store whose last record rotted (4 bytes
/// flipped). A look lists what it can read, says the log is damaged, and
/// writes nothing; `ttr repair` moves the damaged frame to a quarantine
/// file and says what that means; the queue opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_at_a_damaged_copy_writes_nothing_and_repair_sets_the_damage_aside() {
    let dir = support::backend::TempDir::new("ttr-damaged");
    let url = format!("file://{}", dir.0.display());
    let queue = Queue::connect(&url, "orders").await.unwrap();
    for i in 0..30 {
        queue
            .schedule_with_id(format!("order-{i}"), Duration::from_secs(3600), "close it")
            .await
            .unwrap();
    }
    drop(queue);
    let copy = support::backend::TempDir::new("ttr-damaged-copy");
    std::fs::create_dir_all(&copy.0).unwrap();
    let log = copy.0.join("orders.log");
    let mut bytes = Vec::new();
    for _ in 0..50 {
        // The service's committer writes its last frame as it closes.
        bytes = std::fs::read(dir.0.join("orders.log")).unwrap();
        if ttr(&["--url", &url, "stats", "orders"]).status.success()
            && count(
                &stdout(&ttr(&["--url", &url, "stats", "orders"])),
                "pending",
            ) == 30
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let at = bytes.len() - 8;
    for b in &mut bytes[at..at + 4] {
        *b ^= 0x5a;
    }
    std::fs::write(&log, &bytes).unwrap();
    let copy_url = format!("file://{}", copy.0.display());

    let look = ttr(&["--url", &copy_url, "pending", "orders", "--limit", "100"]);
    assert!(look.status.success(), "{}", stderr(&look));
    let listed = stdout(&look)
        .lines()
        .filter(|l| l.contains("order-"))
        .count();
    assert_eq!(listed, 29, "{}", stdout(&look));
    assert!(
        stderr(&look).contains("damaged") && stderr(&look).contains("ttr repair orders"),
        "no word of the damage: {}",
        stderr(&look)
    );
    for look in [
        vec!["--url", &copy_url, "stats", "orders"],
        vec!["--url", &copy_url, "queues"],
        vec!["--url", &copy_url, "job", "orders", "order-3"],
        vec!["--url", &copy_url, "--json", "dead", "orders"],
    ] {
        let out = ttr(&look);
        assert!(out.status.success(), "{look:?}: {}", stderr(&out));
    }
    assert_eq!(
        std::fs::read(&log).unwrap(),
        bytes,
        "a look changed the log"
    );
    let files: Vec<_> = std::fs::read_dir(&copy.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["orders.log"], "a look created files");

    // Repair: the damaged frame goes to a quarantine file.
    let repair = ttr(&["--url", &copy_url, "--json", "repair", "orders"]);
    assert!(repair.status.success(), "{}", stderr(&repair));
    let done = json(&repair);
    let kept = &done["quarantined"];
    let offset = kept["offset"].as_u64().unwrap();
    let quarantine = copy.0.join(format!("orders.log.quarantine-{offset}"));
    assert_eq!(
        kept["path"].as_str().unwrap(),
        quarantine.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(
        std::fs::read(&quarantine).unwrap(),
        &bytes[offset as usize..]
    );
    assert_eq!(std::fs::read(&log).unwrap(), &bytes[..offset as usize]);
    let again = ttr(&["--url", &copy_url, "repair", "orders"]);
    assert!(
        stdout(&again).contains("nothing to repair"),
        "{}",
        stdout(&again)
    );
    let stats = ttr(&["--url", &copy_url, "stats", "orders"]);
    assert_eq!(count(&stdout(&stats), "pending"), 29);
    assert!(stderr(&stats).contains("damaged"), "{}", stderr(&stats));
    // Repair is for embedded stores.
    let redis = ttr(&["--url", "redis://127.0.0.1:1/", "repair", "orders"]);
    assert_eq!(redis.status.code(), Some(2), "{}", stderr(&redis));
}

/// `ttr recurrences` lists a queue's recurring jobs (text and `--json`);
/// `pause-recurrence` and `resume-recurrence` change one, and a name that
/// is none is exit status 1. On an embedded store held by its service,
/// the listing is a look (read-only) and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recurrences_paused_and_resumed() {
    let server = RedisServer::start();
    let url = server.url();
    let queue = Queue::builder(&url, "reports").connect().await.unwrap();
    let nightly = Recurrence::cron("0 30 2 * * *")
        .unwrap()
        .time_zone("Europe/Berlin")
        .unwrap();
    queue.recur("nightly", nightly, "{}").await.unwrap();
    let hourly = Recurrence::every(Duration::from_secs(3600)).unwrap();
    queue.recur("hourly", hourly, "{}").await.unwrap();

    let output = ttr(&["--url", &url, "recurrences", "reports"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for expected in [
        "nightly",
        "0 30 2 * * *",
        "Europe/Berlin",
        "hourly",
        "every 1h",
        "run-once",
    ] {
        assert!(text.contains(expected), "{expected} in {text}");
    }
    let doc = json(&ttr(&["--url", &url, "--json", "recurrences", "reports"]));
    let all = doc["recurrences"].as_array().unwrap();
    assert_eq!(all.len(), 2, "{doc}");
    assert_eq!(all[1]["name"], "nightly");
    assert_eq!(all[1]["time_zone"], "Europe/Berlin");
    assert_eq!(all[1]["paused"], false);
    assert!(all[1]["next"].as_str().unwrap().ends_with('Z'), "{doc}");
    assert_eq!(all[1]["last"], Value::Null);

    let output = ttr(&["--url", &url, "pause-recurrence", "reports", "nightly"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let doc = json(&ttr(&["--url", &url, "--json", "recurrences", "reports"]));
    assert_eq!(doc["recurrences"][1]["paused"], true, "{doc}");
    assert_eq!(doc["recurrences"][1]["next"], Value::Null, "{doc}");
    assert!(stdout(&ttr(&["--url", &url, "recurrences", "reports"])).contains("paused"));
    let output = ttr(&["--url", &url, "resume-recurrence", "reports", "nightly"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(queue.recurrences().await.unwrap().iter().all(|r| !r.paused));

    let output = ttr(&["--url", &url, "pause-recurrence", "reports", "weekly"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("no recurrence named weekly"),
        "{}",
        stderr(&output)
    );

    // An embedded store held by its service: the listing is a look.
    let dir = support::backend::TempDir::new("ttr-recur");
    let file = format!("file://{}", dir.0.display());
    let held = Queue::builder(&file, "reports").connect().await.unwrap();
    let daily = Recurrence::cron("0 0 6 * * *").unwrap();
    held.recur("morning", daily, "{}").await.unwrap();
    let output = ttr(&["--url", &file, "recurrences", "reports"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("morning"), "{}", stdout(&output));
}
