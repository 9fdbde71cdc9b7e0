//! The `ttr` binary, built by cargo and run as an operator would, against
//! a real redis-server (see `support`): its output and exit status.

mod support;

use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use support::{RedisCluster, RedisServer};
use tiered_timer_redis::Queue;

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

#[test]
fn help_and_bad_arguments() {
    let help = ttr(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("Usage:"), "{}", stdout(&help));
    assert!(stdout(&help).contains("ttr [options] stats <queue>"));

    for (args, says) in [
        (&[][..], "which command"),
        (&["stats"][..], "which queue"),
        (&["frobnicate", "orders"][..], "unknown command"),
        (
            &["stats", "orders", "--partitions", "zero"][..],
            "whole number",
        ),
        (&["requeue", "orders"][..], "which job"),
        (
            &["stats", "a{b", "--url", "redis://127.0.0.1:1/"][..],
            "invalid queue name",
        ),
        (
            &["stats", "orders", "--url", "nonsense://x"][..],
            "invalid Redis URL",
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
        assert!(stderr(&output).contains("ttr --help"));
        assert!(stdout(&output).is_empty());
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
        "0.5",
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
    assert!(
        row.ends_with("ago      9 B  card declined by the bank"),
        "{text}"
    );
    // Columns line up: the error starts where its header does.
    assert_eq!(
        header.find("last error"),
        row.find("card declined"),
        "{text}"
    );
    assert!(text.contains("1 of 1 dead letter(s) in orders"), "{text}");

    let output = ttr(&["--url", &url, "requeue", "orders", "no-such-job"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no-such-job is not a dead letter of orders"));

    let output = ttr(&["--url", &url, "requeue", "orders", dead_id.as_str()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("requeued"));
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (4, 0));

    let output = ttr(&["--url", &url, "dead", "orders"]);
    assert_eq!(stdout(&output), "no dead letters in orders\n");

    // Two more dead letters, then purge one and all.
    for reason in ["first", "second"] {
        let job = queue.next().await.unwrap();
        job.bury(reason).await.unwrap();
    }
    let dead = queue.dead_letters(10).await.unwrap();
    let output = ttr(&["--url", &url, "purge", "orders", dead[0].id.as_str()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = ttr(&["--url", &url, "purge", "orders", "--all"]);
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

    // Without --partitions: the queue's recorded count is not 1, and the
    // error says both numbers.
    let output = ttr(&["--url", &url, "stats", "mail"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("has 3 partition(s)")
            && stderr(&output).contains("--partitions 3"),
        "{}",
        stderr(&output)
    );

    let output = ttr(&["--url", &url, "--partitions=3", "requeue", "mail", "--all"]);
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
    assert!(text.contains("3 of 3 dead letter(s) in orders"), "{text}");
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
    ]);
    assert_eq!(
        stdout(&output),
        "requeued 3 dead letter(s) of orders: due now\n"
    );
    let stats = queue.stats().await.unwrap();
    assert_eq!((stats.pending, stats.dead), (66, 0));
}
