//! Confirmation of the commands that delete jobs or change many at once:
//! `purge` (one dead letter or all), `cancel`, and `requeue --all`. (`requeue
//! ID` and `promote ID` change one job and lose nothing: they do not ask.)
//!
//! Ground rules, as `apt`, `terraform destroy` and `gh repo delete` do it:
//!
//! * With `--yes` the command runs.
//! * Without it, on a terminal (stdin), the command first reads what it
//!   would change (how many dead letters, which job and its state), says
//!   so on stderr and asks `[y/N]`; anything but `y` or `yes` (an empty
//!   line, end of input) changes nothing, exit status 1.
//! * Without it and without a terminal (a script, a pipe, cron), it
//!   refuses, exit status 2: a script must say `--yes`, so that a
//!   destructive line is never run by accident with no one to ask.
//!
//! The question goes to stderr, so stdout keeps only the result (and
//! `--json` documents stay parseable). Reading the answer blocks, so it
//! runs on tokio's blocking pool.

use std::io::{BufRead, IsTerminal, Write};

use crate::{Confirm, Failure};

/// What to do about a destructive command, before asking anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// `--yes`: go ahead.
    Go,
    /// A person is there: ask.
    Ask,
    /// Nobody to ask: refuse.
    Refuse,
}

/// The decision for `--yes` (`yes`) and whether stdin is a terminal.
pub(crate) fn decide(yes: bool, terminal: bool) -> Decision {
    if yes {
        Decision::Go
    } else if terminal {
        Decision::Ask
    } else {
        Decision::Refuse
    }
}

/// Whether an answer to `[y/N]` is a yes.
pub(crate) fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Asks before a destructive command: `what` says what it will do ("delete
/// all 106 dead letters of orders for good"). `Ok` to go ahead.
pub(crate) async fn confirm(confirm: Confirm, command: &str, what: &str) -> Result<(), Failure> {
    match decide(confirm.yes, std::io::stdin().is_terminal()) {
        Decision::Go => Ok(()),
        Decision::Refuse => Err(Failure::Usage(format!(
            "`ttr {command}` would {what}; it asks first, and stdin is not a terminal: \
             pass --yes to do it (nothing changed)"
        ))),
        Decision::Ask => {
            let question = format!("This will {what}. Continue? [y/N] ");
            let answer = tokio::task::spawn_blocking(move || ask(&question))
                .await
                .unwrap_or_default();
            if is_yes(&answer) {
                Ok(())
            } else {
                Err(Failure::known("declined", "not confirmed: nothing changed"))
            }
        }
    }
}

/// Prints `question` on stderr and reads one line from stdin (empty at
/// end of input or on an error).
fn ask(question: &str) -> String {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(question.as_bytes());
    let _ = stderr.flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_goes_a_terminal_asks_and_a_script_is_refused() {
        assert_eq!(decide(true, true), Decision::Go);
        assert_eq!(decide(true, false), Decision::Go);
        assert_eq!(decide(false, true), Decision::Ask);
        assert_eq!(decide(false, false), Decision::Refuse);
    }

    #[test]
    fn only_y_or_yes_is_a_yes() {
        for yes in ["y", "Y\n", " yes ", "YES\r\n"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yep", "sure", "y y"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }
}
