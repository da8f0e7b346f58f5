//! PII redaction of a prompt before it leaves the hub: email addresses,
//! payment card numbers (13 to 19 digits, spaces or hyphens between
//! groups, passing the Luhn check) and phone numbers (a run of digits and
//! separators with 8 to 15 digits after a `+`, or 10 to 15 without one).
//! Each is replaced by a placeholder (`[EMAIL]`, `[CARD]`, `[PHONE]`); the
//! kinds found are returned, the values never kept.

pub const EMAIL: &str = "email";
pub const CARD: &str = "card";
pub const PHONE: &str = "phone";

/// `text` with its PII replaced, and the kinds replaced, in order.
pub fn redact(text: &str) -> (String, Vec<&'static str>) {
    let mut found = Vec::new();
    let text = replace(text, EMAIL, "[EMAIL]", &mut found, email_at);
    let text = replace(&text, CARD, "[CARD]", &mut found, card_at);
    let text = replace(&text, PHONE, "[PHONE]", &mut found, phone_at);
    (text, found)
}

/// Where a kind of PII starts at a byte, if it does: its span.
type Finder = fn(&[u8], usize) -> Option<(usize, usize)>;

/// Replaces every span `find` reports, scanning left to right.
fn replace(text: &str, kind: &'static str, placeholder: &str, found: &mut Vec<&'static str>, find: Finder) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        match find(bytes, i) {
            Some((start, end)) => {
                out.push_str(&text[copied..start]);
                out.push_str(placeholder);
                found.push(kind);
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn local_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-')
}

fn domain_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-')
}

/// An email address whose `@` is at `i`: the span from its local part to
/// the end of a domain with a dot and a top-level label of two letters
/// or more.
fn email_at(s: &[u8], i: usize) -> Option<(usize, usize)> {
    if s[i] != b'@' {
        return None;
    }
    let start = (0..i).rev().take_while(|&j| local_char(s[j])).last()?;
    let mut end = i + 1;
    while end < s.len() && domain_char(s[end]) {
        end += 1;
    }
    // A trailing dot or hyphen ends the sentence, not the domain.
    while end > i + 1 && matches!(s[end - 1], b'.' | b'-') {
        end -= 1;
    }
    let domain = std::str::from_utf8(&s[i + 1..end]).ok()?;
    let tld = domain.rsplit_once('.')?.1;
    (tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()) && !domain.starts_with('.')).then_some((start, end))
}

/// The run of digits starting at `i`, separated by at most `gap`
/// characters of `seps` at a time, when `i` starts one (not in the middle
/// of a word or number): its end and its digits.
fn digit_run(s: &[u8], i: usize, seps: &[u8], gap: usize) -> Option<(usize, Vec<u8>)> {
    if !s[i].is_ascii_digit() || (i > 0 && s[i - 1].is_ascii_alphanumeric()) {
        return None;
    }
    // Nor inside a longer run: a digit a few separators back starts it.
    let back = s[..i].iter().rev().take(gap + 1).take_while(|b| seps.contains(b)).count();
    if (1..=gap).contains(&back) && i > back && s[i - back - 1].is_ascii_digit() {
        return None;
    }
    let (mut end, mut digits) = (i, Vec::new());
    let mut j = i;
    while j < s.len() {
        if s[j].is_ascii_digit() {
            digits.push(s[j] - b'0');
            j += 1;
            end = j;
            continue;
        }
        let k = s[j..].iter().take(gap + 1).take_while(|b| seps.contains(b)).count();
        if (1..=gap).contains(&k) && s.get(j + k).is_some_and(u8::is_ascii_digit) {
            j += k;
        } else {
            break;
        }
    }
    (end >= s.len() || !s[end].is_ascii_alphabetic()).then_some((end, digits))
}

fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits.iter().rev().enumerate().map(|(k, &d)| if k % 2 == 1 { [0, 2, 4, 6, 8, 1, 3, 5, 7, 9][d as usize] } else { d as u32 }).sum();
    sum.is_multiple_of(10)
}

fn card_at(s: &[u8], i: usize) -> Option<(usize, usize)> {
    let (end, digits) = digit_run(s, i, b" -", 1)?;
    ((13..=19).contains(&digits.len()) && luhn(&digits)).then_some((i, end))
}

fn phone_at(s: &[u8], i: usize) -> Option<(usize, usize)> {
    let plus = s[i] == b'+';
    let paren = s[i] == b'(';
    if (plus || paren) && (i > 0 && s[i - 1].is_ascii_alphanumeric()) {
        return None;
    }
    let from = if plus || paren { i + 1 } else { i };
    if from >= s.len() {
        return None;
    }
    let (end, digits) = digit_run(s, from, b" -.()", 2)?;
    // An ISO date (`2026-11-25 10:30`) is no phone number.
    let date = |k: usize| s.get(k..k + 10).is_some_and(|d| d.iter().enumerate().all(|(n, b)| if n == 4 || n == 7 { *b == b'-' } else { b.is_ascii_digit() }));
    if date(from) {
        return None;
    }
    let enough = if plus { (8..=15).contains(&digits.len()) } else { (10..=15).contains(&digits.len()) };
    enough.then_some((i, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_cards_and_phones_are_replaced() {
        let (text, kinds) = redact("Mail ana.b+x@mail.example.org, card 4111 1111 1111 1111 or 4111-1111-1111-1111; call +33 6 12 34 56 78 or (415) 555-2671.");
        assert_eq!(text, "Mail [EMAIL], card [CARD] or [CARD]; call [PHONE] or [PHONE].");
        assert_eq!(kinds, vec![EMAIL, CARD, CARD, PHONE, PHONE]);
    }

    #[test]
    fn what_is_not_pii_is_left_alone() {
        for text in [
            "Order 4111 1111 1111 1112 fails the Luhn check",
            "On 2026-11-25 at 10.30, room 1234567, at 2026-11-25 10:30",
            "user@localhost is no address; neither is a@b.c",
            "version 1.2.3, sku A123456789012B",
        ] {
            let (out, kinds) = redact(text);
            assert_eq!(out, text);
            assert!(kinds.is_empty(), "{text}: {kinds:?}");
        }
    }

    #[test]
    fn the_luhn_check() {
        assert!(luhn(&[4, 5, 3, 2, 0, 1, 5, 1, 1, 2, 8, 3, 0, 3, 6, 6]));
        assert!(!luhn(&[4, 5, 3, 2, 0, 1, 5, 1, 1, 2, 8, 3, 0, 3, 6, 7]));
    }
}
