//! The checks every queue name and job id passes before any backend sees
//! it: one rule for every backend, so both give the same answer to the
//! same name.

use super::error::Error;

/// The longest queue name, in bytes.
pub(crate) const MAX_QUEUE_NAME: usize = 200;
/// The longest job id, in bytes.
pub(crate) const MAX_JOB_ID: usize = 512;

/// Checks a queue name, one rule for every backend: 1 to
/// [`MAX_QUEUE_NAME`] bytes, no `{`, `}`, `#` (Redis' hash tags and
/// partitions), whitespace or control characters, no `/` and not `.` or
/// `..` (an embedded queue's name is a file's name in its store's
/// directory). So a queue can move between backends under its name.
pub(crate) fn check_queue_name(name: &str) -> Result<(), Error> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_QUEUE_NAME {
        Some("it is longer than 200 bytes")
    } else if name
        .chars()
        .any(|c| matches!(c, '{' | '}' | '#') || c.is_whitespace() || c.is_control())
    {
        Some("it contains `{`, `}`, `#`, whitespace or a control character")
    } else if name.contains('/') || name == "." || name == ".." {
        Some("a queue's name is also a file's name: no `/`, not `.` or `..`")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: name.chars().take(64).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a job id: 1 to [`MAX_JOB_ID`] bytes.
pub(crate) fn check_job_id(id: &str) -> Result<(), Error> {
    if id.is_empty() {
        Err(Error::InvalidJobId {
            reason: "it is empty",
        })
    } else if id.len() > MAX_JOB_ID {
        Err(Error::InvalidJobId {
            reason: "it is longer than 512 bytes",
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_queue_name("orders").is_ok());
        assert!(check_queue_name("").is_err());
        assert!(check_queue_name(&"x".repeat(201)).is_err());
        assert!(check_queue_name("a{b").is_err());
        assert!(check_queue_name("a#1").is_err());
        assert!(check_queue_name("a b").is_err());
        for file_name in ["a/b", ".", ".."] {
            assert!(check_queue_name(file_name).is_err(), "{file_name}");
        }
        assert!(check_queue_name("a.b").is_ok());
        assert!(check_job_id("").is_err());
        assert!(check_job_id(&"x".repeat(513)).is_err());
        assert!(check_job_id("order-42").is_ok());
    }
}
