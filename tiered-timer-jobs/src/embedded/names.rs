//! A queue's name as a file name: its log is `<name>.log` in the store's
//! directory (`check_queue_name` refuses `/`, `.` and `..` on every
//! backend, so no name reaches outside the directory), and the files
//! beside a log are named after it.

use std::path::{Path, PathBuf};

/// The file name of queue `name`'s log.
pub(crate) fn log_name(name: &str) -> String {
    format!("{name}.log")
}

/// The path of queue `name`'s log in the store in `dir`.
pub(crate) fn log_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(log_name(name))
}

/// A file beside the log at `path`: its name and `suffix` (not
/// `Path::with_extension`, which reads a name such as `..log` as `.` with
/// the extension `log`, and makes `..log.new` into `..`).
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    path.with_file_name(name)
}

/// The queue whose log has the file name `file`, if it is a log's.
pub(crate) fn queue_of_log(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".log")?;
    (!stem.is_empty()).then(|| stem.to_owned())
}

/// The queue a log is of, for messages (its file name without `.log`).
pub(crate) fn queue_of(path: &Path) -> String {
    path.file_name()
        .and_then(|name| queue_of_log(&name.to_string_lossy()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_queue_name_is_one_file_in_the_store() {
        for (name, file) in [
            ("orders", "orders.log"),
            ("a.", "a..log"),
            ("a.log", "a.log.log"),
        ] {
            assert_eq!(log_name(name), file);
            assert_eq!(queue_of_log(file).as_deref(), Some(name));
            let path = log_path(Path::new("/store"), name);
            assert_eq!(path.parent(), Some(Path::new("/store")), "{name}");
            assert_eq!(queue_of(&path), name);
            let new = beside(&path, ".new");
            assert_eq!(new.parent(), Some(Path::new("/store")), "{name}");
            assert_eq!(
                new.file_name().unwrap().to_str(),
                Some(&*format!("{file}.new"))
            );
        }
        assert_eq!(queue_of_log("orders.log.quarantine-16"), None);
        assert_eq!(queue_of_log(".log"), None);
    }
}
