//! The bottom layer: backend-neutral data. The values every backend
//! speaks and every public call returns (ids, errors, stats, listings,
//! lateness, what a repair did), the limits every input is checked
//! against, and how they read for people. Nothing here imports from above
//! (see CONTRIBUTING.md, "Architecture of the jobs crate").

pub(crate) mod checks;
pub(crate) mod clock;
pub(crate) mod cron;
pub(crate) mod error;
pub(crate) mod history;
pub(crate) mod human;
pub(crate) mod id;
pub(crate) mod lateness;
pub(crate) mod limits;
pub(crate) mod listing;
pub(crate) mod recurrence;
pub(crate) mod repaired;
pub(crate) mod stats;
