//! The extraction of sdk-parsing, free of I/O: contacts (a name, email
//! addresses, phone numbers in E.164) out of one capture's text.
//!
//! The rules are conservative: a name is taken only where its form says
//! whose it is (`Name <address>`, a vCard's `FN`, the top line of a
//! signature), and data is attributed to a person only where the capture's
//! kind says it belongs together (one vCard, one signature, one card).
//! Phone numbers are libphonenumber's (the `phonenumber` crate): a number
//! written without its country code needs a default region.

use std::ops::Range;

use phonenumber::{Mode, country::Id};
use serde::Serialize;
use utoipa::ToSchema;

/// What a capture is, which decides how it is read (see `extract`).
pub const KINDS: [&str; 5] = ["email", "vcard", "text", "signature", "ocr"];

/// Phone-number candidates examined in one capture at most; the rest are
/// ignored, so a capture full of digits costs a bounded time.
pub const MAX_PHONE_CANDIDATES: usize = 200;

/// One person (or one address) found in a capture.
#[derive(Debug, Default, PartialEq, Serialize, ToSchema)]
#[schema(as = ParsedContact)]
pub struct Contact {
    pub name: Option<String>,
    /// Each once (compared without case); the domain in lower case.
    pub emails: Vec<String>,
    /// E.164 (`+31201234567`), each once.
    pub phones: Vec<String>,
}

/// Text that looked like a phone number but is not one.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
#[schema(as = RejectedPhone)]
pub struct Rejected {
    /// As written in the capture.
    pub text: String,
    /// `region_required` (no country code and no `default_region`) or
    /// `invalid` (not a number in use in its region).
    pub reason: &'static str,
}

#[derive(Debug, Default)]
pub struct Extracted {
    pub contacts: Vec<Contact>,
    pub rejected_phones: Vec<Rejected>,
}

/// Reads one capture of a kind of `KINDS`:
/// - `vcard`: one contact per `BEGIN:VCARD` … `END:VCARD` (`FN`, else `N`;
///   `EMAIL`; `TEL`);
/// - `signature`, `ocr` (a signature block, a scanned business card): one
///   person; the name is a `Name <address>` mailbox's or the signature
///   rule's (`signature_name`);
/// - `email`: a message: one contact per mailbox of `From`, `Sender`,
///   `Reply-To`, `To`, `Cc`; the signature after a `-- ` line is the
///   sender's; the rest of the body is not read (quoted and forwarded text
///   would attribute data to the wrong person);
/// - `text`: one contact per mailbox or bare address; the phone numbers go
///   to the only contact when there is exactly one, else each is a contact
///   of its own.
///
/// Contacts sharing an address are merged into the first.
pub fn extract(kind: &str, raw: &str, region: Option<Id>) -> Extracted {
    let mut b = Builder { region, ..Builder::default() };
    match kind {
        "vcard" => vcards(&mut b, raw),
        "email" => message(&mut b, raw),
        "signature" | "ocr" => {
            let card = card(&mut b, raw);
            b.add(card);
        }
        _ => text(&mut b, raw),
    }
    Extracted { contacts: b.contacts, rejected_phones: b.rejected }
}

#[derive(Default)]
struct Builder {
    region: Option<Id>,
    contacts: Vec<Contact>,
    rejected: Vec<Rejected>,
    candidates: usize,
}

impl Builder {
    fn add(&mut self, c: Contact) {
        if c.name.is_none() && c.emails.is_empty() && c.phones.is_empty() {
            return;
        }
        let shared = self.contacts.iter().position(|k| k.emails.iter().any(|e| c.emails.iter().any(|f| e.eq_ignore_ascii_case(f))));
        let into = match shared {
            Some(i) => &mut self.contacts[i],
            None => {
                self.contacts.push(Contact::default());
                self.contacts.last_mut().expect("just pushed")
            }
        };
        if into.name.is_none() {
            into.name = c.name;
        }
        for e in c.emails {
            if !into.emails.iter().any(|x| x.eq_ignore_ascii_case(&e)) {
                into.emails.push(e);
            }
        }
        for p in c.phones {
            if !into.phones.contains(&p) {
                into.phones.push(p);
            }
        }
    }

    /// A phone number in E.164, or `None` with the text recorded as rejected.
    fn phone(&mut self, text: &str) -> Option<String> {
        let text = text.trim();
        if text.is_empty() || self.candidates >= MAX_PHONE_CANDIDATES {
            return None;
        }
        self.candidates += 1;
        let reason = if !text.starts_with('+') && self.region.is_none() {
            "region_required"
        } else {
            match phonenumber::parse(self.region, text) {
                Ok(n) if n.is_valid() => return Some(n.format().mode(Mode::E164).to_string()),
                _ => "invalid",
            }
        };
        if !self.rejected.iter().any(|r| r.text == text) {
            self.rejected.push(Rejected { text: text.to_string(), reason });
        }
        None
    }

    /// The phone numbers written in `text` (addresses blanked out first).
    fn phones_in(&mut self, text: &str) -> Vec<String> {
        let mut masked = text.to_string();
        for (span, _) in emails(text) {
            masked.replace_range(span.clone(), &" ".repeat(span.len()));
        }
        phone_candidates(&masked).into_iter().filter_map(|c| self.phone(c)).collect()
    }
}

fn vcards(b: &mut Builder, raw: &str) {
    let mut lines: Vec<String> = Vec::new();
    for line in raw.lines() {
        match (line.strip_prefix([' ', '\t']), lines.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => lines.push(line.to_string()),
        }
    }
    let mut card: Option<(Contact, Option<String>)> = None;
    for line in &lines {
        let Some((head, value)) = line.split_once(':') else { continue };
        let prop = head.split(';').next().unwrap_or_default();
        let prop = prop.rsplit('.').next().unwrap_or_default().to_ascii_uppercase();
        match (prop.as_str(), card.as_mut()) {
            ("BEGIN", _) if value.trim().eq_ignore_ascii_case("vcard") => card = Some(Default::default()),
            ("END", Some(_)) => {
                let (mut c, n) = card.take().expect("a card is open");
                c.name = c.name.or(n);
                b.add(c);
            }
            ("FN", Some((c, _))) => c.name = clean_name(&unescape(value)),
            ("N", Some((_, n))) => {
                let parts: Vec<String> = split_unescaped(value).iter().map(|p| unescape(p)).collect();
                let given = parts.get(1).map(String::as_str).unwrap_or_default();
                *n = clean_name(&format!("{given} {}", parts.first().map(String::as_str).unwrap_or_default()));
            }
            ("EMAIL", Some((c, _))) => c.emails.extend(email(value.trim().trim_start_matches("mailto:"))),
            ("TEL", Some(_)) => {
                let number = value.trim().trim_start_matches("tel:").split(';').next().unwrap_or_default();
                if let Some(p) = b.phone(number) {
                    card.as_mut().expect("a card is open").0.phones.push(p);
                }
            }
            _ => {}
        }
    }
}

/// A vCard value's escapes (RFC 6350 3.4); a line break becomes a space.
fn unescape(v: &str) -> String {
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match (c == '\\').then(|| chars.next()) {
            None => out.push(c),
            Some(Some('n' | 'N')) => out.push(' '),
            Some(Some(escaped)) => out.push(escaped),
            Some(None) => {}
        }
    }
    out
}

/// The components of a structured vCard value (`;` not escaped).
fn split_unescaped(v: &str) -> Vec<&str> {
    let (mut parts, mut start, mut escaped) = (Vec::new(), 0, false);
    for (i, c) in v.char_indices() {
        if c == ';' && !escaped {
            parts.push(&v[start..i]);
            start = i + 1;
        }
        escaped = c == '\\' && !escaped;
    }
    parts.push(&v[start..]);
    parts
}

fn message(b: &mut Builder, raw: &str) {
    let raw = raw.replace("\r\n", "\n");
    let looks_like_header = |l: &str| l.split_once(':').is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    let (head, body) = match raw.lines().next() {
        Some(first) if looks_like_header(first) => raw.split_once("\n\n").unwrap_or((&raw, "")),
        _ => ("", raw.as_str()),
    };
    let mut headers: Vec<String> = Vec::new();
    for line in head.lines() {
        match (line.starts_with([' ', '\t']), headers.last_mut()) {
            (true, Some(last)) => last.push_str(line),
            _ => headers.push(line.to_string()),
        }
    }
    let mut sender = None;
    for h in &headers {
        let Some((name, value)) = h.split_once(':') else { continue };
        let name = name.trim().to_ascii_lowercase();
        if !["from", "sender", "reply-to", "to", "cc"].contains(&name.as_str()) {
            continue;
        }
        for c in address_list(value) {
            if name == "from" && sender.is_none() {
                sender = c.emails.first().cloned();
            }
            b.add(c);
        }
    }
    let lines: Vec<&str> = body.lines().collect();
    if let Some(at) = lines.iter().rposition(|l| l.trim_end() == "--") {
        let signature: Vec<&str> = lines[at + 1..].iter().take_while(|l| !l.starts_with('>')).take(10).copied().collect();
        let mut c = card(b, &signature.join("\n"));
        // The sender signs: the signature joins the sender's contact.
        c.emails.extend(sender);
        b.add(c);
    }
}

/// The mailboxes of an address header: `Name <a@b>`, `"Doe, Jane" <a@b>`,
/// `<a@b>` or `a@b`, separated by commas outside quotes and brackets.
fn address_list(value: &str) -> Vec<Contact> {
    let (mut items, mut start, mut quoted, mut angle) = (Vec::new(), 0, false, false);
    for (i, c) in value.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' if !quoted => angle = true,
            '>' if !quoted => angle = false,
            ',' if !quoted && !angle => {
                items.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&value[start..]);
    items
        .into_iter()
        .filter_map(|item| {
            let item = item.trim();
            let (name, addr) = match (item.rfind('<'), item.ends_with('>')) {
                (Some(lt), true) => (clean_name(item[..lt].trim().trim_matches('"').replace("\\\"", "\"").as_str()), &item[lt + 1..item.len() - 1]),
                _ => (None, item),
            };
            Some(Contact { name, emails: vec![email(addr.trim())?], phones: vec![] })
        })
        .collect()
}

/// One person's block (a signature, a card): its addresses, its phone
/// numbers and its name.
fn card(b: &mut Builder, block: &str) -> Contact {
    let found = mailboxes(block);
    let name = found.iter().find_map(|(n, _)| n.clone()).or_else(|| signature_name(block));
    let mut emails: Vec<String> = found.into_iter().map(|(_, e)| e).collect();
    emails.extend(self::emails(block).into_iter().map(|(_, e)| e));
    Contact { name, emails, phones: b.phones_in(block) }
}

fn text(b: &mut Builder, raw: &str) {
    for (name, email) in mailboxes(raw) {
        b.add(Contact { name, emails: vec![email], phones: vec![] });
    }
    for (_, email) in emails(raw) {
        b.add(Contact { name: None, emails: vec![email], phones: vec![] });
    }
    let phones = b.phones_in(raw);
    if let [only] = b.contacts.as_mut_slice() {
        for p in phones {
            if !only.phones.contains(&p) {
                only.phones.push(p);
            }
        }
    } else {
        for p in phones {
            if !b.contacts.iter().any(|c| c.phones.contains(&p)) {
                b.add(Contact { name: None, emails: vec![], phones: vec![p] });
            }
        }
    }
}

/// Words that start a sentence or a sign-off, never a name.
const NOT_NAMES: [&str; 34] = [
    "to",
    "from",
    "cc",
    "contact",
    "write",
    "email",
    "mail",
    "e-mail",
    "call",
    "ask",
    "dear",
    "hi",
    "hello",
    "by",
    "for",
    "and",
    "or",
    "with",
    "via",
    "the",
    "regards",
    "thanks",
    "thank",
    "cheers",
    "sincerely",
    "best",
    "kind",
    "warm",
    "yours",
    "sent",
    "phone",
    "mobile",
    "tel",
    "fax",
];
/// Lower-case particles a name may hold between its capitalised words.
const PARTICLES: [&str; 11] = ["van", "von", "der", "den", "de", "da", "di", "du", "la", "le", "bin"];

fn is_name_word(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
        && w.chars().count() <= 40
        && w.chars().all(|c| c.is_alphabetic() || matches!(c, '.' | '\'' | '-' | '’'))
        && !NOT_NAMES.contains(&w.to_lowercase().trim_end_matches('.'))
}

/// A display name fit to return: one line, a letter, no address, no
/// undecoded MIME encoded-word, at most 128 characters.
fn clean_name(s: &str) -> Option<String> {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let fit = !s.is_empty() && s.chars().count() <= 128 && s.chars().any(char::is_alphabetic) && !s.contains('@') && !s.contains("=?");
    fit.then_some(s)
}

/// The `Name <address>` forms of free text: the name is the quoted string
/// before `<`, or the run of capitalised words (at most four, particles
/// allowed between them) right before it; `None` when there is neither.
fn mailboxes(text: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut from = 0;
        while let Some(lt) = line[from..].find('<').map(|i| from + i) {
            let Some(gt) = line[lt..].find('>').map(|i| lt + i) else { break };
            from = gt + 1;
            let Some(addr) = email(line[lt + 1..gt].trim()) else { continue };
            let before = line[..lt].trim_end();
            let name = match before.strip_suffix('"').and_then(|b| b.rfind('"').map(|q| &b[q + 1..])) {
                Some(quoted) => clean_name(quoted),
                None => {
                    let mut words: Vec<&str> = Vec::new();
                    for w in before.split_whitespace().rev() {
                        let particle = !words.is_empty() && PARTICLES.contains(&w);
                        if words.len() == 4 || !(is_name_word(w) || particle) {
                            break;
                        }
                        words.insert(0, w);
                    }
                    while words.first().is_some_and(|w| PARTICLES.contains(w)) {
                        words.remove(0);
                    }
                    clean_name(&words.join(" "))
                }
            };
            out.push((name, addr));
        }
    }
    out
}

/// The signature rule: the name is the first of the block's first three
/// lines (sign-off lines ending in `,` and `--` skipped) that is two to four
/// capitalised words (particles allowed between them), none a sign-off or a
/// label word (`Regards`, `Phone`, ...), with no digit and no address.
fn signature_name(block: &str) -> Option<String> {
    let lines = block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.ends_with(',') && *l != "--");
    lines.take(3).find_map(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        let last = words.len().saturating_sub(1);
        let ok = (2..=4).contains(&words.len()) && words.iter().enumerate().all(|(i, w)| is_name_word(w) || (i > 0 && i < last && PARTICLES.contains(w)));
        if ok { clean_name(l) } else { None }
    })
}

/// Every email address of `text` with its byte span, in order. Addresses
/// are the common form: a local part of `A-Z a-z 0-9 . _ % + - '` (no
/// quoted local parts), a domain of at least two labels whose last is
/// alphabetic (or `xn--`); `normalise_email` says the rest.
pub fn emails(text: &str) -> Vec<(Range<usize>, String)> {
    let b = text.as_bytes();
    let local = |c: u8| c.is_ascii_alphanumeric() || b"._%+-'".contains(&c);
    let domain = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'-';
    let (mut out, mut from) = (Vec::new(), 0);
    for (at, _) in text.match_indices('@') {
        if at < from {
            continue;
        }
        let mut start = at;
        while start > from && local(b[start - 1]) {
            start -= 1;
        }
        while start < at && !b[start].is_ascii_alphanumeric() {
            start += 1;
        }
        let mut end = at + 1;
        while end < b.len() && domain(b[end]) {
            end += 1;
        }
        while end > at + 1 && matches!(b[end - 1], b'.' | b'-') {
            end -= 1;
        }
        if let Some(addr) = email(&text[start..end]) {
            out.push((start..end, addr));
            from = end;
        }
    }
    out
}

/// `s` when it is one address in the form `emails` finds, with its domain
/// in lower case.
pub fn email(s: &str) -> Option<String> {
    let (local, domain) = s.split_once('@')?;
    let local_ok = (1..=64).contains(&local.len())
        && local.bytes().all(|c| c.is_ascii_alphanumeric() || b"._%+-'".contains(&c))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..");
    let labels: Vec<&str> = domain.split('.').collect();
    let tld = labels.last().copied().unwrap_or_default();
    let domain_ok = domain.len() <= 253
        && labels.len() >= 2
        && labels
            .iter()
            .all(|l| (1..=63).contains(&l.len()) && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') && !l.starts_with('-') && !l.ends_with('-'))
        && ((tld.len() >= 2 && tld.bytes().all(|c| c.is_ascii_alphabetic())) || tld.to_ascii_lowercase().starts_with("xn--"));
    (local_ok && domain_ok && s.len() <= 254).then(|| format!("{local}@{}", domain.to_ascii_lowercase()))
}

/// Runs of text that may be phone numbers: from a `+`, `(` or digit not
/// glued to a word, over digits and single separators (space, `-`, `.`,
/// `(`, `)`), holding 7 to 17 digits; dates (`2024-01-31`, `31.01.2024`)
/// are not candidates.
fn phone_candidates(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i].1;
            let glued = i > 0 && (chars[i - 1].1.is_alphanumeric() || matches!(chars[i - 1].1, '.' | '+' | '-' | '_' | '/'));
            if !(c == '+' || c == '(' || c.is_ascii_digit()) || glued {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < chars.len() {
                let (d, prev) = (chars[j].1, chars[j - 1].1);
                let (sep, paren) = (|c: char| matches!(c, ' ' | '\u{a0}' | '-' | '.' | '(' | ')'), |c: char| matches!(c, '(' | ')'));
                if !(d.is_ascii_digit() || sep(d)) || (sep(d) && sep(prev) && !paren(d) && !paren(prev)) {
                    break;
                }
                j += 1;
            }
            let mut k = j;
            while k > i && !chars[k - 1].1.is_ascii_digit() {
                k -= 1;
            }
            let end = chars.get(k).map_or(line.len(), |c| c.0);
            let candidate = &line[chars[i].0..end];
            let digits = candidate.chars().filter(char::is_ascii_digit).count();
            if (7..=17).contains(&digits) && !is_date(candidate) {
                out.push(candidate);
            }
            i = j;
        }
    }
    out
}

/// `2024-01-31`, `31/01/2024`, `1.2.2024`: three digit groups joined by one
/// and the same separator, the year first or last.
fn is_date(s: &str) -> bool {
    let Some(sep) = s.chars().find(|c| !c.is_ascii_digit()) else { return false };
    let groups: Vec<&str> = s.split(sep).collect();
    matches!(sep, '-' | '/' | '.')
        && groups.len() == 3
        && groups.iter().all(|g| !g.is_empty() && g.bytes().all(|c| c.is_ascii_digit()))
        && ((groups[0].len() == 4 && groups[1].len() <= 2 && groups[2].len() <= 2) || (groups[0].len() <= 2 && groups[1].len() <= 2 && groups[2].len() == 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nl() -> Option<Id> {
        Some(Id::NL)
    }

    #[test]
    fn addresses_are_found_in_their_common_form_and_nothing_else() {
        let found: Vec<String> =
            emails("Mail 'jane.doe+x@Example.COM', (ops@sub.example.org). Not: a@b, x@localhost, @example.com, .a@x..com, n@1.2.3.4 end@example.com.")
                .into_iter()
                .map(|(_, e)| e)
                .collect();
        assert_eq!(found, ["jane.doe+x@example.com", "ops@sub.example.org", "end@example.com"]);
        assert_eq!(email("a..b@example.com"), None);
        assert_eq!(email("a@-x.com"), None);
        assert_eq!(email("a@xn--bcher-kva.xn--p1ai").as_deref(), Some("a@xn--bcher-kva.xn--p1ai"));
    }

    #[test]
    fn phone_numbers_become_e164_with_the_default_region_for_national_ones() {
        let out = extract("text", "Call +44 7400 123456 or 010-123 4567, not 2024-01-31 nor 12345.", nl());
        assert_eq!(out.contacts.len(), 2);
        assert_eq!((out.contacts[0].phones.clone(), out.contacts[1].phones.clone()), (vec!["+447400123456".to_string()], vec!["+31101234567".to_string()]));
        let out = extract("text", "Office: +1 (201) 555-0123; home +1 201 555 0123.", None);
        assert_eq!(out.contacts, [Contact { name: None, emails: vec![], phones: vec!["+12015550123".into()] }]);
        let out = extract("text", "Call 010-123 4567 or +1 099 555 0123", None);
        assert!(out.contacts.is_empty());
        let reasons: Vec<(&str, &str)> = out.rejected_phones.iter().map(|r| (r.text.as_str(), r.reason)).collect();
        assert_eq!(reasons, [("010-123 4567", "region_required"), ("+1 099 555 0123", "invalid")]);
    }

    #[test]
    fn a_vcard_is_one_contact_with_its_formatted_name() {
        let raw = "BEGIN:VCARD\r\nVERSION:4.0\r\nN:Doe;Jane;;;\r\nFN:Jane Doe\\, PhD\r\nitem1.EMAIL;TYPE=work:jane@example.com\r\nEMAIL:JANE@example.com\r\n\
                   TEL;TYPE=cell:+31 6 1234\r\n 5678\r\nTEL;VALUE=uri:tel:+1-201-555-0123;ext=7\r\nEND:VCARD\r\nBEGIN:VCARD\r\nN:Smith;John\r\nEND:VCARD\r\n";
        let out = extract("vcard", raw, None);
        assert_eq!(
            out.contacts,
            [
                Contact {
                    name: Some("Jane Doe, PhD".into()),
                    emails: vec!["jane@example.com".into()],
                    phones: vec!["+31612345678".into(), "+12015550123".into()]
                },
                Contact { name: Some("John Smith".into()), emails: vec![], phones: vec![] },
            ]
        );
    }

    #[test]
    fn a_message_names_its_mailboxes_and_gives_the_signature_to_the_sender() {
        let raw = "From: \"Doe, Jane\" <jane@example.com>\r\nTo: bob@example.org,\r\n Carol Jones <carol@example.net>\r\nCc: =?UTF-8?B?w6k=?= <e@example.com>\r\n\
                   Subject: hi\r\n\r\nSee you.\r\n> quoted +44 7400 123999\r\n-- \r\nJane Doe\r\nMobile: 06 12345678\r\n";
        let out = extract("email", raw, nl());
        let names: Vec<(Option<&str>, &str)> = out.contacts.iter().map(|c| (c.name.as_deref(), c.emails[0].as_str())).collect();
        assert_eq!(
            names,
            [(Some("Doe, Jane"), "jane@example.com"), (None, "bob@example.org"), (Some("Carol Jones"), "carol@example.net"), (None, "e@example.com")]
        );
        assert_eq!(out.contacts[0].phones, ["+31612345678"]);
        assert!(out.contacts[1..].iter().all(|c| c.phones.is_empty()));
    }

    #[test]
    fn a_signature_names_its_person_by_the_conservative_rule() {
        let out = extract("signature", "Best regards,\nJan van der Berg\nSales Director, Acme B.V.\nT +31 10 123 4567\njan@acme.example", None);
        assert_eq!(
            out.contacts,
            [Contact { name: Some("Jan van der Berg".into()), emails: vec!["jan@acme.example".into()], phones: vec!["+31101234567".into()] }]
        );
        assert_eq!(signature_name("Kind Regards\nACME support team\n"), None);
        assert_eq!(signature_name("jane doe\nJane Doe 2\nOne Two Three Four Five\nJane Doe"), None, "only the first three lines");
    }

    #[test]
    fn free_text_keeps_the_name_before_an_address_and_merges_repeats() {
        let out = extract("text", "Please write to Jane Doe <jane@example.com> or jane@EXAMPLE.com; cc Bob <bob@example.org>.", None);
        let got: Vec<(Option<&str>, Vec<String>)> = out.contacts.iter().map(|c| (c.name.as_deref(), c.emails.clone())).collect();
        assert_eq!(got, [(Some("Jane Doe"), vec!["jane@example.com".to_string()]), (Some("Bob"), vec!["bob@example.org".to_string()])]);
    }

    #[test]
    fn a_capture_full_of_digits_examines_a_bounded_number_of_candidates() {
        let raw: String = (0..MAX_PHONE_CANDIDATES * 3).map(|i| format!("+1 099 555 {i:04}\n")).collect();
        let out = extract("text", &raw, None);
        assert_eq!(out.rejected_phones.len(), MAX_PHONE_CANDIDATES);
        let out = extract("text", &"+1 099 555 0123\n".repeat(5), None);
        assert_eq!(out.rejected_phones.len(), 1, "the same text once");
    }
}
