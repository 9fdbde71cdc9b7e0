//! Tables aligned by display width; the escaping of text from users
//! ([`safe`], [`payload`]) is shared with the dashboard's pages.

use unicode_width::UnicodeWidthStr;

pub(crate) use tiered_timer_dashboard::for_ttr::{payload, redacted, safe};

/// Rows as aligned columns, two spaces apart, by display width (so
/// double-width characters line up); `right[i]` aligns column `i` to the
/// right. Cells must already be [`safe`]. Trailing spaces are trimmed.
pub(crate) fn table(rows: &[Vec<String>], right: &[bool]) -> String {
    let mut widths = vec![0; right.len()];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = widths[i] - cell.width();
            if right.get(i).copied().unwrap_or(false) {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_by_display_width() {
        let rows = [
            vec!["id".to_owned(), "n".to_owned()],
            vec!["日本".to_owned(), "100".to_owned()],
            vec!["long-id".to_owned(), "7".to_owned()],
        ];
        assert_eq!(
            table(&rows, &[false, true]),
            "id         n\n日本     100\nlong-id    7\n"
        );
    }
}
