//! [`Builder`]: a dashboard's settings, checked once by
//! [`Builder::build`] (a typed [`BuildError`], never a panic).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use tiered_timer_jobs::Queue;

use crate::app::{Access, App, Check, Settings, Source, Store};
use crate::Dashboard;

/// Settings for a [`Dashboard`], from [`Dashboard::builder`].
///
/// Defaults: no queues; read-only (no token, no check); pages reload every
/// 5 s; the queues are sampled for the charts every 10 s; the pages are
/// titled "Jobs".
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use tiered_timer_dashboard::Dashboard;
/// use tiered_timer_jobs::Queue;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mail = Queue::connect("redis://127.0.0.1:6379/", "mail").await?;
/// let dashboard = Dashboard::builder()
///     .queue(mail)
///     .token("s3cret")
///     .refresh(Duration::from_secs(10))
///     .title("Shop jobs")
///     .build()?;
/// # drop(dashboard);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Builder {
    queues: Vec<Queue>,
    store: Option<Store>,
    token: Option<String>,
    check: Option<Check>,
    login_url: Option<String>,
    read_only: bool,
    read_only_note: Option<String>,
    refresh: Duration,
    sample_every: Duration,
    title: String,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("queues", &self.queues)
            .field(
                "store_url",
                &self.store.as_ref().map(|s| crate::text::redacted(&s.url)),
            )
            .field("token", &self.token.as_ref().map(|_| "..."))
            .field("authorize", &self.check.as_ref().map(|_| "..."))
            .field("read_only", &self.read_only)
            .field("refresh", &self.refresh)
            .field("sample_every", &self.sample_every)
            .finish_non_exhaustive()
    }
}

/// Why [`Builder::build`] refused its settings.
///
/// # Examples
///
/// ```
/// use tiered_timer_dashboard::{BuildError, Dashboard};
///
/// let refused = Dashboard::builder().token("").build().unwrap_err();
/// assert_eq!(refused, BuildError::EmptyToken);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// [`Builder::token`] with an empty token: anyone could log in with it.
    EmptyToken,
    /// Both [`Builder::token`] and [`Builder::authorize`]: the application's
    /// check replaces the token, so only one may be given.
    TokenAndCheck,
    /// A duration setting of zero (`refresh` or `sample_every`): a page
    /// that reloads, or a sampler that reads, without pause.
    ZeroDuration {
        /// The setting's name.
        setting: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::EmptyToken => {
                f.write_str("the dashboard's token is empty: anyone could log in with it")
            }
            BuildError::TokenAndCheck => f.write_str(
                "both a token and an authorize check: the check replaces the token, give one",
            ),
            BuildError::ZeroDuration { setting } => {
                write!(
                    f,
                    "the dashboard's {setting} is zero: it must be above zero"
                )
            }
        }
    }
}

impl std::error::Error for BuildError {}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            queues: Vec::new(),
            store: None,
            token: None,
            check: None,
            login_url: None,
            read_only: false,
            read_only_note: None,
            refresh: Duration::from_secs(5),
            sample_every: Duration::from_secs(10),
            title: "Jobs".to_owned(),
        }
    }

    /// Shows this queue, read and changed through this handle (the
    /// application's own: an embedded store is then shared with the
    /// service, not reopened). A later handle of the same name replaces an
    /// earlier one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let orders = tiered_timer_jobs::Queue::connect("file:///var/lib/shop/jobs", "orders").await?;
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder().queue(orders).build()?;
    /// # drop(dashboard);
    /// # Ok(())
    /// # }
    /// ```
    pub fn queue(mut self, queue: Queue) -> Builder {
        self.queues.retain(|q| q.name() != queue.name());
        self.queues.push(queue);
        self
    }

    /// Shows these queues: [`queue`](Builder::queue) for each.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn demo(orders: tiered_timer_jobs::Queue, mail: tiered_timer_jobs::Queue)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .queues([orders, mail])
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok(())
    /// # }
    /// ```
    pub fn queues(self, queues: impl IntoIterator<Item = Queue>) -> Builder {
        queues.into_iter().fold(self, Builder::queue)
    }

    /// Also shows every queue found at this store (a Redis URL, or an
    /// embedded store's `file://` directory), each opened to look only;
    /// see the [crate docs](crate#where-the-queues-come-from). The URL
    /// (without its password) heads the overview.
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .store_url("redis://127.0.0.1:6379/")
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn store_url(mut self, url: impl Into<String>) -> Builder {
        let store = self.store.get_or_insert_with(Store::default);
        store.url = url.into();
        self
    }

    /// The [`store_url`](Builder::store_url) is a node of a Redis Cluster.
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .store_url("redis://10.0.0.7:7000/")
    ///     .cluster()
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn cluster(mut self) -> Builder {
        self.store.get_or_insert_with(Store::default).cluster = true;
        self
    }

    /// How long a command to the [`store_url`](Builder::store_url)'s Redis
    /// may take, connecting included (default 5 s; not used on a
    /// `file://` store).
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .store_url("redis://127.0.0.1:6379/")
    ///     .command_timeout(std::time::Duration::from_secs(2))
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn command_timeout(mut self, timeout: Duration) -> Builder {
        self.store.get_or_insert_with(Store::default).timeout = timeout;
        self
    }

    /// Allows actions to whoever gives this token: in an `Authorization:
    /// Bearer` header, or on the login page (which sets a session cookie).
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder().token("s3cret").build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Builder {
        self.token = Some(token.into());
        self
    }

    /// Allows actions to the requests this check accepts, instead of a
    /// token: the application's own authentication decides (a user its
    /// middleware put in the request's extensions, a header its proxy
    /// sets...). The CSRF and same-origin checks still apply. Looking is
    /// not checked: wrap the router in a layer for that.
    ///
    /// # Examples
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct User {
    ///     admin: bool,
    /// }
    ///
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .authorize(|request| request.extensions.get::<User>().is_some_and(|u| u.admin))
    ///     .login_url("/login")
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn authorize<F>(mut self, check: F) -> Builder
    where
        F: Fn(&Parts) -> bool + Send + Sync + 'static,
    {
        self.check = Some(Arc::new(check));
        self
    }

    /// Where the "log in to act" hint points when an
    /// [`authorize`](Builder::authorize) check refuses (the application's
    /// own login page); without it the hint is text.
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .authorize(|_| false)
    ///     .login_url("/account/login")
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn login_url(mut self, url: impl Into<String>) -> Builder {
        self.login_url = Some(url.into());
        self
    }

    /// Offers no action at all, whatever the token or check: the pages
    /// only look (as without a token or a check).
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .token("s3cret")
    ///     .read_only(true)
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Builder {
        self.read_only = read_only;
        self
    }

    /// What a read-only dashboard says about how to allow actions (default:
    /// that it was set up without a token or a check). `ttr serve` says to
    /// start it with `--token`.
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .read_only_note("Actions are made with the ops CLI.")
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn read_only_note(mut self, note: impl Into<String>) -> Builder {
        self.read_only_note = Some(note.into());
        self
    }

    /// How often the pages reload themselves (default 5 s; not while a box
    /// is ticked or a field is being typed in).
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .refresh(std::time::Duration::from_secs(30))
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn refresh(mut self, every: Duration) -> Builder {
        self.refresh = every;
        self
    }

    /// How often every queue is sampled for the charts (default 10 s).
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder()
    ///     .sample_every(std::time::Duration::from_secs(2))
    ///     .build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn sample_every(mut self, every: Duration) -> Builder {
        self.sample_every = every;
        self
    }

    /// The name in the pages' header and titles (default "Jobs").
    ///
    /// # Examples
    ///
    /// ```
    /// let dashboard = tiered_timer_dashboard::Dashboard::builder().title("ttr").build()?;
    /// # drop(dashboard);
    /// # Ok::<(), tiered_timer_dashboard::BuildError>(())
    /// ```
    pub fn title(mut self, title: impl Into<String>) -> Builder {
        self.title = title.into();
        self
    }

    /// Checks the settings and makes the dashboard; nothing connects yet
    /// (the store's queues are found at the first request).
    ///
    /// # Errors
    ///
    /// [`BuildError::EmptyToken`], [`BuildError::TokenAndCheck`],
    /// [`BuildError::ZeroDuration`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tiered_timer_dashboard::{BuildError, Dashboard};
    ///
    /// let refused = Dashboard::builder().refresh(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(refused, BuildError::ZeroDuration { setting: "refresh" });
    /// ```
    pub fn build(self) -> Result<Dashboard, BuildError> {
        for (setting, value) in [
            ("refresh", self.refresh),
            ("sample_every", self.sample_every),
        ] {
            if value.is_zero() {
                return Err(BuildError::ZeroDuration { setting });
            }
        }
        let access = match (self.token, self.check) {
            (Some(_), Some(_)) => return Err(BuildError::TokenAndCheck),
            (Some(token), None) if token.is_empty() => return Err(BuildError::EmptyToken),
            _ if self.read_only => Access::read_only(self.read_only_note),
            (Some(token), None) => Access::token(token),
            (None, Some(check)) => Access::Check {
                check,
                login_url: self.login_url,
            },
            (None, None) => Access::read_only(self.read_only_note),
        };
        let settings = Settings {
            title: self.title,
            refresh: self.refresh,
            sample_every: self.sample_every,
        };
        let source = Source::new(self.queues, self.store);
        Ok(Dashboard {
            app: Arc::new(App::new(settings, source, access)),
        })
    }
}
