//! The state behind every request: where the queues come from (the
//! application's handles, a store's discovered queues), who may act, and
//! the charts' history.
//!
//! Ground rules:
//!
//! * A request only reaches queues that exist: a name is looked up among
//!   the handles and the store's queues before anything is opened, so a
//!   visitor cannot make the dashboard open a connection per name it
//!   invents.
//! * A queue found at a store is opened to look only (`register(false)`;
//!   on an embedded store read-only, without its lock), once, and kept.
//!   An action on it uses that handle on Redis; on an embedded store it
//!   opens the store as its owner for that action alone.
//! * The charts' samples are taken by a task that holds the dashboard
//!   weakly: it ends when the last router is dropped.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use axum::http::request::Parts;
use tiered_timer_jobs::{find_queues, Error, Lateness, Queue, Stats};
use tokio::sync::Mutex;

use crate::auth::random_token;

/// How much history the charts keep.
pub(crate) const WINDOW: Duration = Duration::from_secs(3600);
/// How often a store's list of queues is read again.
const REDISCOVER: Duration = Duration::from_secs(30);

/// An application's check of a request that wants to act.
pub(crate) type Check = Arc<dyn Fn(&Parts) -> bool + Send + Sync>;

/// How the dashboard looks and refreshes.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) title: String,
    pub(crate) refresh: Duration,
    pub(crate) sample_every: Duration,
}

/// A store whose queues are discovered. (No `Debug`: its URL may hold a
/// password.)
#[derive(Clone)]
pub(crate) struct Store {
    pub(crate) url: String,
    pub(crate) cluster: bool,
    pub(crate) timeout: Duration,
}

impl Default for Store {
    fn default() -> Store {
        Store {
            url: String::new(),
            cluster: false,
            timeout: Duration::from_secs(5),
        }
    }
}

impl Store {
    fn is_embedded(&self) -> bool {
        self.url.starts_with("file://")
    }
}

/// Where the queues come from.
pub(crate) struct Source {
    /// The application's own handles, by name.
    handles: Vec<Queue>,
    store: Option<Store>,
}

impl Source {
    pub(crate) fn new(handles: Vec<Queue>, store: Option<Store>) -> Source {
        Source {
            handles,
            store: store.filter(|s| !s.url.is_empty()),
        }
    }
}

/// Who may act.
pub(crate) enum Access {
    /// Nobody: the pages only look.
    ReadOnly { note: String },
    /// Whoever gives the token, or holds the session its login set.
    Token { token: String, session: String },
    /// Whoever the application's check accepts.
    Check {
        check: Check,
        login_url: Option<String>,
    },
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::ReadOnly { .. } => "ReadOnly",
            Access::Token { .. } => "Token",
            Access::Check { .. } => "Check",
        })
    }
}

impl Access {
    pub(crate) fn read_only(note: Option<String>) -> Access {
        Access::ReadOnly {
            note: note.unwrap_or_else(|| {
                "This dashboard is read-only: it was set up without a token or an \
                 authorization check."
                    .to_owned()
            }),
        }
    }

    pub(crate) fn token(token: String) -> Access {
        Access::Token {
            token,
            session: random_token(),
        }
    }
}

/// One queue the dashboard shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) partitions: u32,
}

/// One sample of a queue for the charts.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) at: SystemTime,
    pub(crate) pending: u64,
    pub(crate) due_now: u64,
    pub(crate) leased: u64,
}

/// What the charts know of one queue.
#[derive(Debug, Default)]
struct History {
    samples: VecDeque<Sample>,
    /// Lateness reads, oldest first: the newest minus the oldest is the
    /// last hour's claims (or since sampling began).
    lateness: VecDeque<(SystemTime, Lateness)>,
}

/// The store's queues as last read, and the handles opened to look.
#[derive(Debug, Default)]
struct Known {
    read_at: Option<Instant>,
    found: Vec<Listed>,
    opened: HashMap<String, (u32, Queue)>,
}

/// The state behind every request.
pub(crate) struct App {
    pub(crate) settings: Settings,
    source: Source,
    pub(crate) access: Access,
    /// This dashboard's CSRF token, in every form.
    pub(crate) csrf: String,
    known: Mutex<Known>,
    history: std::sync::Mutex<HashMap<String, History>>,
    sampling: AtomicBool,
}

impl fmt::Debug for App {
    /// Without the secrets (the CSRF token, the token, the session) and
    /// the store URL's password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let handles: Vec<&str> = self.source.handles.iter().map(Queue::name).collect();
        f.debug_struct("App")
            .field("settings", &self.settings)
            .field("queues", &handles)
            .field("store", &self.store_label())
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl App {
    pub(crate) fn new(settings: Settings, source: Source, access: Access) -> App {
        App {
            settings,
            source,
            access,
            csrf: random_token(),
            known: Mutex::new(Known::default()),
            history: std::sync::Mutex::new(HashMap::new()),
            sampling: AtomicBool::new(false),
        }
    }

    /// What heads the overview: the store's URL without its password, or
    /// nothing for the application's handles alone.
    pub(crate) fn store_label(&self) -> Option<String> {
        self.source
            .store
            .as_ref()
            .map(|s| crate::text::redacted(&s.url))
    }

    /// Whose clock the times of queue `name` are by.
    pub(crate) fn clock_of(&self, name: &str) -> &'static str {
        match &self.source.store {
            Some(store) if !self.is_handle(name) => crate::human::clock_name(&store.url),
            // The public API does not say which backend a handle is on.
            _ => "store time",
        }
    }

    fn is_handle(&self, name: &str) -> bool {
        self.source.handles.iter().any(|q| q.name() == name)
    }

    /// Every queue shown, by name: the handles, and the store's queues
    /// (read again if the last read is older than [`REDISCOVER`]).
    pub(crate) async fn queues(&self) -> Result<Vec<Listed>, String> {
        let mut all: Vec<Listed> = self
            .source
            .handles
            .iter()
            .map(|q| Listed {
                name: q.name().to_owned(),
                partitions: q.partitions(),
            })
            .collect();
        if let Some(store) = &self.source.store {
            let found = self.found(store).await?;
            all.extend(found.into_iter().filter(|f| !self.is_handle(&f.name)));
        }
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    async fn found(&self, store: &Store) -> Result<Vec<Listed>, String> {
        let mut known = self.known.lock().await;
        if known.read_at.is_none_or(|at| at.elapsed() > REDISCOVER) {
            let found = find_queues(&store.url, store.cluster, store.timeout)
                .await
                .map_err(|e| format!("cannot list the queues: {e}"))?;
            known.found = found
                .into_iter()
                .map(|q| Listed {
                    name: q.name,
                    partitions: q.partitions,
                })
                .collect();
            known.read_at = Some(Instant::now());
        }
        Ok(known.found.clone())
    }

    /// Whether queue `name` is shown.
    pub(crate) async fn exists(&self, name: &str) -> Result<bool, String> {
        Ok(self.queues().await?.iter().any(|q| q.name == name))
    }

    /// The handle to look at queue `name` through: the application's, or
    /// one opened to look at a store's queue (with its found partition
    /// count).
    pub(crate) async fn queue(&self, name: &str) -> Result<Queue, String> {
        if let Some(handle) = self.source.handles.iter().find(|q| q.name() == name) {
            return Ok(handle.clone());
        }
        let Some(store) = &self.source.store else {
            return Err(format!("no queue named {name:?} here"));
        };
        let Some(partitions) = self
            .found(store)
            .await?
            .iter()
            .find(|q| q.name == name)
            .map(|q| q.partitions)
        else {
            return Err(format!("no queue named {name:?} in this store"));
        };
        let mut known = self.known.lock().await;
        if let Some((p, queue)) = known.opened.get(name) {
            if *p == partitions {
                return Ok(queue.clone());
            }
        }
        // A look registers nothing (`register(false)`), even a queue
        // found by its keys alone.
        let mut builder = Queue::builder(&store.url, name)
            .partitions(partitions)
            .command_timeout(store.timeout)
            .register(false)
            .read_only(store.is_embedded());
        if store.cluster {
            builder = builder.cluster();
        }
        let queue = builder.connect().await.map_err(|e| e.to_string())?;
        known
            .opened
            .insert(name.to_owned(), (partitions, queue.clone()));
        Ok(queue)
    }

    /// A handle that may change queue `name`: the application's, the look's
    /// on Redis, or on an embedded store (whose looks are read-only) the
    /// store opened as its owner would, for this action alone (so it
    /// needs the store's service stopped: `Error::Locked` otherwise).
    pub(crate) async fn queue_to_change(&self, name: &str) -> Result<Queue, String> {
        let queue = self.queue(name).await?;
        match &self.source.store {
            Some(store) if store.is_embedded() && !self.is_handle(name) => {
                Queue::builder(&store.url, name)
                    .register(false)
                    .connect()
                    .await
                    .map_err(|e| e.to_string())
            }
            _ => Ok(queue),
        }
    }

    /// Reads a queue's stats and lateness, and keeps them as a sample if
    /// the last one is older than a second.
    pub(crate) async fn read(&self, queue: &Queue) -> Result<(Stats, Lateness), Error> {
        let stats = queue.stats().await?;
        let lateness = queue.lateness().await?;
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let h = history.entry(queue.name().to_owned()).or_default();
        let now = stats.redis_time;
        if h.samples
            .back()
            .is_none_or(|s| now.duration_since(s.at).unwrap_or_default() >= Duration::from_secs(1))
        {
            h.samples.push_back(Sample {
                at: now,
                pending: stats.pending,
                due_now: stats.due_now,
                leased: stats.leased,
            });
            h.lateness.push_back((now, lateness.clone()));
        }
        let horizon = now.checked_sub(WINDOW).unwrap_or(SystemTime::UNIX_EPOCH);
        while h.samples.front().is_some_and(|s| s.at < horizon) {
            h.samples.pop_front();
        }
        // Keep the oldest lateness read inside the window as the base.
        while h.lateness.len() > 1 && h.lateness[1].0 < horizon {
            h.lateness.pop_front();
        }
        Ok((stats, lateness))
    }

    /// The samples of a queue, and its lateness over the window.
    pub(crate) fn history_of(&self, name: &str) -> (Vec<Sample>, Lateness) {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        match history.get(name) {
            Some(h) => {
                let recent = match (h.lateness.front(), h.lateness.back()) {
                    (Some(first), Some(last)) => last.1.since(&first.1),
                    _ => Lateness::default(),
                };
                (h.samples.iter().cloned().collect(), recent)
            }
            None => (Vec::new(), Lateness::default()),
        }
    }

    /// Starts the sampler task, once; it must be called inside a tokio
    /// runtime.
    pub(crate) fn start_sampling(app: &Arc<App>) {
        if !app.sampling.swap(true, Ordering::AcqRel) {
            tokio::spawn(sample(Arc::downgrade(app), app.settings.sample_every));
        }
    }
}

/// Samples every queue every `every`, while the dashboard lives.
async fn sample(app: Weak<App>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    // A slow store delays the next round rather than bunching rounds up.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(app) = app.upgrade() else {
            return;
        };
        let Ok(queues) = app.queues().await else {
            continue;
        };
        for listed in queues {
            if let Ok(queue) = app.queue(&listed.name).await {
                let _ = app.read(&queue).await;
            }
        }
    }
}
