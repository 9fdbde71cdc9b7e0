//! Text from users made safe to show: on a terminal (`ttr`) and on the
//! pages (which escape it for HTML besides).
//!
//! Ids, payloads and error reasons come from users: printed as they are,
//! an escape sequence in one could move the cursor, rewrite earlier lines
//! or change the terminal's title, and a bidirectional override could make
//! a line read differently from what it holds. So every such string goes
//! through [`safe`] before it is printed.

/// `s` with every control character (C0, DEL, C1) and every
/// bidirectional-formatting character written as an escape: `\n`, `\t`,
/// `\r`, `\e` for ESC, else `\u{..}`. A backslash is written `\\`, so the
/// output reads back unambiguously.
pub fn safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if c.is_control() || is_bidi(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A store's URL without the credentials it may hold
/// (`redis://***@host:6379/`), for pages and messages.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// The characters that reorder text (the "Trojan Source" set).
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A payload for a person: its text (made [`safe`]) if it is UTF-8, else
/// `hex:` and its bytes in hex; cut to about `max` characters, with `…`
/// and the full size when cut.
pub fn payload(bytes: &[u8], total_len: u64, max: usize) -> String {
    let mut shown = match std::str::from_utf8(bytes) {
        Ok(text) => safe(text),
        // A preview cut inside a character: show the whole characters.
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
            safe(std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default())
        }
        Err(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("hex:{hex}")
        }
    };
    let cut = shown.chars().count() > max || (bytes.len() as u64) < total_len;
    if shown.chars().count() > max {
        shown = shown.chars().take(max).collect();
    }
    if cut {
        shown.push_str(&format!("… ({})", crate::human::bytes(total_len)));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(safe("order-42"), "order-42");
        assert_eq!(safe("a\x1b[2Jb"), "a\\e[2Jb");
        assert_eq!(safe("line\nnext\ttab\r"), "line\\nnext\\ttab\\r");
        assert_eq!(safe("\u{7}\u{7f}\u{9b}"), "\\u{7}\\u{7f}\\u{9b}");
        assert_eq!(safe("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(safe("back\\slash"), "back\\\\slash");
        assert_eq!(safe("日本"), "日本");
    }

    #[test]
    fn payloads_show_as_text_or_hex() {
        assert_eq!(payload(b"close order 42", 14, 64), "close order 42");
        assert_eq!(payload(&[0xff, 0x00, 0x10], 3, 64), "hex:ff0010");
        assert_eq!(payload(b"abcdef", 6, 3), "abc… (6 B)");
        assert_eq!(payload(b"abc", 5000, 64), "abc… (4.9 KiB)");
        // A preview cut in the middle of "é" shows what is whole.
        assert_eq!(payload(&"aé".as_bytes()[..2], 3, 64), "a… (3 B)");
    }
}
