//! Closing unpaid orders, durably: a producer and three workers.
//!
//! * Worker A dies while it holds a job: that job comes back once its
//!   lease runs out, with `attempt() == 2`.
//! * Worker C works on a long job, keeping its lease alive past the lease
//!   length, and is stopped: it stops taking jobs and hands back the job
//!   in hand, which another worker gets at once, with its attempt not
//!   counted.
//! * Worker B handles the rest, and stops the same way if you press Ctrl-C.
//!
//! ```sh
//! cargo run -p tiered-timer-jobs --example orders
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p tiered-timer-jobs --example orders
//! ```
//!
//! Without `REDIS_URL` the jobs are in an embedded store (`file://`, a
//! fresh directory under the system's temporary directory, removed at the
//! end): nothing to install. A store belongs to one process, so there
//! workers A and C are tasks of this process: A is aborted (its job
//! dropped unacked, as a crash leaves it) and C is told to stop. On Redis
//! they are real processes: A is killed with SIGKILL and C gets a real
//! SIGINT (Ctrl-C).

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use tiered_timer_jobs::{Job, Queue};

const LEASE: Duration = Duration::from_secs(3);

async fn connect(url: &str) -> Queue {
    Queue::builder(url, "orders-example")
        .lease(LEASE)
        .max_attempts(5)
        .connect()
        .await
        .expect("connect to the job store")
}

/// Worker A: takes one job and hangs on it, until it is killed.
async fn worker_a(url: &str, say: impl Fn(String)) {
    let queue = connect(url).await;
    let job = queue.next().await.expect("claim a job");
    say(format!("HOLDING {} attempt {}", job.id(), job.attempt()));
    std::future::pending::<()>().await;
}

/// Closing an order: here, just taking `work` (longer than a lease for
/// worker C).
async fn close_order(job: &Job, work: Duration) {
    let _ = job.payload();
    tokio::time::sleep(work).await;
}

/// A worker as a service runs it: takes up to `jobs` jobs, each worked on
/// for `work` with its lease kept alive, until `stop` (Ctrl-C). Then it
/// stops taking jobs (`close`) and hands back the job in hand (dropped
/// after `close`, so released), and `shutdown` waits for that release.
/// Returns whether it was stopped.
async fn work_until_stopped(
    queue: &Queue,
    work: Duration,
    jobs: usize,
    stop: impl std::future::Future,
    say: impl Fn(String),
) -> bool {
    let mut ctrl_c = std::pin::pin!(stop);
    for _ in 0..jobs {
        let job = tokio::select! {
            biased; // listen for Ctrl-C before anything else
            _ = &mut ctrl_c => break,
            job = queue.next() => job.expect("the store is up"),
        };
        let late = SystemTime::now()
            .duration_since(job.deadline())
            .unwrap_or_default();
        say(format!(
            "HOLDING {} attempt {} ({}), {} ms after it was due",
            job.id(),
            job.attempt(),
            String::from_utf8_lossy(job.payload()),
            late.as_millis()
        ));
        tokio::select! {
            biased;
            _ = &mut ctrl_c => {
                say(format!("stopped: handing {} back", job.id()));
                queue.close(); // no more jobs; jobs dropped from now on are released
                drop(job);
                queue.shutdown().await; // waits for the release
                return true;
            }
            worked = job.keep_alive(close_order(&job, work)) => match worked {
                Ok(()) => {
                    let id = job.id().clone();
                    job.ack().await.expect("ack");
                    say(format!("done with {id}"));
                }
                Err(error) => say(format!("lease lost, left to the next worker: {error}")),
            },
        }
    }
    queue.shutdown().await;
    false
}

/// Worker C: a long job kept alive, until `stop`.
async fn worker_c(url: &str, stop: impl std::future::Future, say: impl Fn(String)) {
    let queue = connect(url).await;
    let stopped = work_until_stopped(&queue, LEASE * 10, 1, stop, &say).await;
    if stopped {
        say("STOPPED".to_owned());
    }
}

fn start_child(mode: &str, url: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([mode, url])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a worker process");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Where the jobs are: the Redis at `REDIS_URL`, or a fresh embedded
/// store (removed on drop).
struct Store {
    url: String,
    dir: Option<std::path::PathBuf>,
}

impl Store {
    fn open() -> Store {
        if let Ok(url) = std::env::var("REDIS_URL") {
            return Store { url, dir: None };
        }
        let dir = std::env::temp_dir().join(format!("ttr-orders-{}", std::process::id()));
        Store {
            url: format!("file://{}", dir.display()),
            dir: Some(dir),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let print = |line: String| println!("{line}");
    match args.get(1).map(String::as_str) {
        Some("worker-a") => return worker_a(&args[2], print).await,
        Some("worker-c") => return worker_c(&args[2], tokio::signal::ctrl_c(), print).await,
        _ => {}
    }

    let store = Store::open();
    let url = store.url.clone();
    let started = Instant::now();
    let say = move |what: String| println!("[{:>5.2} s] {what}", started.elapsed().as_secs_f64());
    say(format!("jobs at {url}"));

    let producer = connect(&url).await;
    for (order, secs) in [("order-1", 1.0), ("order-2", 1.5), ("order-3", 2.0)] {
        let payload = format!("close {order} if still unpaid");
        producer
            .schedule_with_id(order, Duration::from_secs_f64(secs), payload)
            .await
            .unwrap();
        say(format!("producer: {order} due in {secs} s"));
    }
    // A producer that retries after a timeout makes no duplicate.
    producer
        .schedule_with_id("order-1", Duration::from_secs(1), "again")
        .await
        .unwrap();
    say(format!(
        "producer: scheduled order-1 again (a retry): still {} pending",
        producer.pending().await.unwrap()
    ));

    let c = if store.dir.is_some() {
        in_process_a_and_c(&url, say).await
    } else {
        processes_a_and_c(&url, say)
    };

    say(format!(
        "worker B: starting; gets order-3, order-1 once worker A's {} s lease runs out \
         (attempt 2), and order-2 as soon as worker C hands it back (attempt 1 again). \
         Press Ctrl-C to stop it the same way.",
        LEASE.as_secs()
    ));
    let worker_b = connect(&url).await;
    let b = tokio::spawn(async move {
        let stopped = work_until_stopped(
            &worker_b,
            Duration::ZERO,
            3,
            tokio::signal::ctrl_c(),
            |line| say(format!("worker B: {}", line.to_lowercase())),
        )
        .await;
        if stopped {
            say("worker B: stopped by Ctrl-C".into());
        }
    });

    tokio::time::sleep(LEASE * 4 / 3).await;
    c.stop(say).await;

    b.await.unwrap();
    say(format!(
        "pending {}, leased {}",
        producer.pending().await.unwrap(),
        producer.leased().await.unwrap()
    ));
}

/// Worker C, and how to stop it.
enum WorkerC {
    Process(Child, Lines<BufReader<ChildStdout>>),
    Task(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    ),
}

impl WorkerC {
    async fn stop(self, say: impl Fn(String)) {
        match self {
            WorkerC::Process(mut c, lines) => {
                say(
                    "worker C: still holds order-2 after 4/3 of a lease (kept alive); \
                     pressing Ctrl-C (SIGINT)"
                        .into(),
                );
                let status = Command::new("kill")
                    .args(["-INT", &c.id().to_string()])
                    .status()
                    .expect("run kill");
                assert!(status.success());
                for line in lines {
                    say(format!("worker C: {}", line.unwrap().to_lowercase()));
                }
                c.wait().unwrap();
            }
            WorkerC::Task(stop, task) => {
                say(
                    "worker C: still holds order-2 after 4/3 of a lease (kept alive); stopping it"
                        .into(),
                );
                let _ = stop.send(());
                task.await.unwrap();
            }
        }
    }
}

/// Workers A and C as processes (Redis).
fn processes_a_and_c(url: &str, say: impl Fn(String)) -> WorkerC {
    say("worker A: starting (a separate process)".into());
    let (mut a, mut lines) = start_child("worker-a", url);
    let held = lines.next().expect("worker A reports").unwrap();
    say(format!(
        "worker A: {} -- and hangs on it; killing it (SIGKILL)",
        held.to_lowercase()
    ));
    a.kill().unwrap();
    a.wait().unwrap();

    say("worker C: starting (a separate process); its jobs take 30 s, 10 leases".into());
    let (c, mut lines) = start_child("worker-c", url);
    let held = lines.next().expect("worker C reports").unwrap();
    say(format!("worker C: {}", held.to_lowercase()));
    WorkerC::Process(c, lines)
}

/// Workers A and C as tasks of this process (the embedded store).
async fn in_process_a_and_c(
    url: &str,
    say: impl Fn(String) + Copy + Send + Sync + 'static,
) -> WorkerC {
    say("worker A: starting (a task)".into());
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let held_tx = std::sync::Mutex::new(Some(held_tx));
    let a_url = url.to_owned();
    let a = tokio::spawn(async move {
        worker_a(&a_url, |line| {
            if let Some(tx) = held_tx.lock().unwrap().take() {
                let _ = tx.send(line);
            }
        })
        .await;
    });
    let held = held_rx.await.expect("worker A reports");
    say(format!(
        "worker A: {} -- and hangs on it; aborting it (its job dropped unacked, as in a crash)",
        held.to_lowercase()
    ));
    a.abort();
    let _ = a.await;

    say("worker C: starting (a task); its jobs take 30 s, 10 leases".into());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let held_tx = std::sync::Mutex::new(Some(held_tx));
    let c_url = url.to_owned();
    let c = tokio::spawn(async move {
        worker_c(&c_url, stop_rx, move |line| {
            match held_tx.lock().unwrap().take() {
                Some(tx) => {
                    let _ = tx.send(line);
                }
                None => say(format!("worker C: {}", line.to_lowercase())),
            }
        })
        .await;
    });
    let held = held_rx.await.expect("worker C reports");
    say(format!("worker C: {}", held.to_lowercase()));
    WorkerC::Task(stop_tx, c)
}
