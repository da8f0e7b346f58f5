//! The PDF form of a trace export: the export's header fields, then each
//! run and each audit entry as lines of text, on as many A4 pages as they
//! take. Written with `pdf-writer` in the standard Courier fonts (no font
//! is embedded; every PDF reader has them), WinAnsi-encoded: a character
//! outside Latin-1 is written `?` (the JSON form carries it exactly). The
//! pages' content streams are deflated (`FlateDecode`): text compresses
//! about tenfold.

use std::io::Write;

use flate2::{Compression, write::ZlibEncoder};
use pdf_writer::{Content, Filter, Finish, Name, Pdf, Rect, Ref, Str, TextStr};
use serde_json::Value;

const PAGE_WIDTH: f32 = 595.0;
const PAGE_HEIGHT: f32 = 842.0;
const MARGIN: f32 = 50.0;
const FONT_SIZE: f32 = 9.0;
const LEADING: f32 = 11.0;
/// Courier's glyphs are all 600/1000 of the font size wide.
const COLUMNS: usize = ((PAGE_WIDTH - 2.0 * MARGIN) / (FONT_SIZE * 0.6)) as usize;
/// The lines of a page, above its footer.
const LINES_PER_PAGE: usize = ((PAGE_HEIGHT - 2.0 * MARGIN - 2.0 * LEADING) / LEADING) as usize;

const REGULAR: Name = Name(b"F1");
const BOLD: Name = Name(b"F2");

/// One line of a page: bold for a heading.
struct Line {
    bold: bool,
    text: Vec<u8>,
}

/// The header fields of an export, in the order the PDF shows them.
pub struct Header<'a> {
    pub export_id: &'a str,
    pub tenant_id: &'a str,
    pub trace_id: &'a str,
    pub generated_at: &'a str,
}

/// The PDF of a trace's runs and audit entries.
pub fn render(header: &Header, runs: &[Value], entries: &[Value]) -> Vec<u8> {
    write(header, &lines(header, runs, entries))
}

/// The text of the export, line by line.
fn lines(header: &Header, runs: &[Value], entries: &[Value]) -> Vec<Line> {
    let mut lines = Vec::new();
    let heading = |lines: &mut Vec<Line>, text: &str| lines.push(Line { bold: true, text: win_ansi(text) });
    heading(&mut lines, "Trace export (platform.trace-export.v1)");
    for (name, value) in [
        ("export_id", header.export_id),
        ("tenant_id", header.tenant_id),
        ("trace_id", header.trace_id),
        ("generated_at", header.generated_at),
        ("runs", &runs.len().to_string()),
        ("audit_entries", &entries.len().to_string()),
    ] {
        field(&mut lines, "", name, value);
    }
    field(&mut lines, "", "signature", "HMAC-SHA256 of this file's exact bytes under the tenant's trace key (the export's signature_hex, key_id)");
    for (title, items, label) in [("Runs (oldest first)", runs, "Run"), ("Audit entries", entries, "Entry")] {
        lines.push(Line { bold: false, text: Vec::new() });
        heading(&mut lines, title);
        for (i, item) in items.iter().enumerate() {
            let kind = item.get("event_type").and_then(Value::as_str).map(|t| format!(": {t}")).unwrap_or_default();
            heading(&mut lines, &format!("{label} {} of {}{kind}", i + 1, items.len()));
            if let Some(fields) = item.as_object() {
                for (name, value) in fields {
                    field(&mut lines, "  ", name, &shown(value));
                }
            }
        }
    }
    lines
}

/// `name: value`, wrapped at the page's width, continuation lines indented.
fn field(lines: &mut Vec<Line>, indent: &str, name: &str, value: &str) {
    let text = win_ansi(&format!("{indent}{name}: {value}"));
    let follow = win_ansi(&format!("{indent}    "));
    let mut rest = &text[..];
    let mut first = true;
    while first || !rest.is_empty() {
        let room = if first { COLUMNS } else { COLUMNS - follow.len() };
        let (now, later) = rest.split_at(rest.len().min(room));
        let mut line = if first { Vec::new() } else { follow.clone() };
        line.extend_from_slice(now);
        lines.push(Line { bold: false, text: line });
        (rest, first) = (later, false);
    }
}

/// A field's value as text: a string as it is, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Text in WinAnsiEncoding, one byte a character: printable ASCII and
/// Latin-1 (the same code points there), `?` for anything else.
fn win_ansi(text: &str) -> Vec<u8> {
    text.chars()
        .map(|c| match c as u32 {
            n @ (0x20..=0x7e | 0xa0..=0xff) => n as u8,
            _ => b'?',
        })
        .collect()
}

fn write(header: &Header, lines: &[Line]) -> Vec<u8> {
    let pages: Vec<&[Line]> = lines.chunks(LINES_PER_PAGE).collect();
    let (catalog, tree, regular, bold, info) = (Ref::new(1), Ref::new(2), Ref::new(3), Ref::new(4), Ref::new(5));
    // Each page is two objects: the page and its content stream.
    let page_ref = |i: usize| (Ref::new(6 + 2 * i as i32), Ref::new(7 + 2 * i as i32));
    let mut pdf = Pdf::new();
    pdf.catalog(catalog).pages(tree);
    pdf.pages(tree).kids((0..pages.len()).map(|i| page_ref(i).0)).count(pages.len() as i32);
    pdf.type1_font(regular).base_font(Name(b"Courier")).encoding_predefined(Name(b"WinAnsiEncoding"));
    pdf.type1_font(bold).base_font(Name(b"Courier-Bold")).encoding_predefined(Name(b"WinAnsiEncoding"));
    let title = format!("Trace {} (export {})", header.trace_id, header.export_id);
    pdf.document_info(info).title(TextStr(&title)).producer(TextStr("hub sdk-trace"));
    for (i, page_lines) in pages.iter().enumerate() {
        let (page_id, content_id) = page_ref(i);
        let mut page = pdf.page(page_id);
        page.media_box(Rect::new(0.0, 0.0, PAGE_WIDTH, PAGE_HEIGHT)).parent(tree).contents(content_id);
        page.resources().fonts().pair(REGULAR, regular).pair(BOLD, bold);
        page.finish();

        let mut content = Content::new();
        content.begin_text();
        content.set_leading(LEADING);
        content.next_line(MARGIN, PAGE_HEIGHT - MARGIN - FONT_SIZE);
        for line in page_lines.iter() {
            content.set_font(if line.bold { BOLD } else { REGULAR }, FONT_SIZE);
            content.show(Str(&line.text));
            content.next_line_using_leading();
        }
        content.end_text();
        let footer = win_ansi(&format!("trace {}  export {}  page {} of {}", header.trace_id, header.export_id, i + 1, pages.len()));
        content.begin_text();
        content.set_font(REGULAR, 7.0);
        content.next_line(MARGIN, MARGIN - 2.0 * LEADING);
        content.show(Str(&footer[..footer.len().min(COLUMNS + COLUMNS / 4)]));
        content.end_text();
        pdf.stream(content_id, &deflate(&content.finish())).filter(Filter::FlateDecode);
    }
    pdf.finish()
}

/// zlib's deflate of `bytes`, what `FlateDecode` reads.
fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_win_ansi_and_wrapped_at_the_width() {
        assert_eq!(win_ansi("café €"), b"caf\xe9 ?".to_vec());
        let mut lines = Vec::new();
        field(&mut lines, "  ", "payload", &"x".repeat(3 * COLUMNS));
        assert!(lines.len() > 3 && lines.iter().all(|l| l.text.len() <= COLUMNS), "{}", lines.len());
        let joined: Vec<u8> = lines.iter().enumerate().flat_map(|(i, l)| if i == 0 { l.text.clone() } else { l.text[6..].to_vec() }).collect();
        assert_eq!(joined, win_ansi(&format!("  payload: {}", "x".repeat(3 * COLUMNS))), "nothing is lost in the wrapping");
    }

    #[test]
    fn a_long_trace_takes_several_pages() {
        let header = Header { export_id: "e-1", tenant_id: "t-1", trace_id: "trace-1", generated_at: "2026-01-01T00:00:00Z" };
        let runs: Vec<Value> = (0..100).map(|i| json!({ "run_id": format!("run-{i}"), "status": "active" })).collect();
        let pdf = render(&header, &runs, &[]);
        assert!(pdf.starts_with(b"%PDF-"));
        let text = String::from_utf8_lossy(&pdf);
        // The header, then 100 runs of three lines each: more than four pages.
        let pages = lines(&header, &runs, &[]).len().div_ceil(LINES_PER_PAGE);
        assert!(pages > 4, "{pages}");
        assert!(text.contains(&format!("/Count {pages}")), "{text}");
        assert_eq!(text.matches("/Filter /FlateDecode").count(), pages, "every page's content is deflated");
        // The last page's content, inflated: the last run and the footer.
        let last = &pdf[pdf.windows(10).rposition(|w| w == b">>\nstream\n").unwrap() + 10..];
        let last = &last[..last.windows(10).position(|w| w == b"\nendstream").unwrap()];
        let mut page = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(last), &mut page).unwrap();
        let page = String::from_utf8_lossy(&page);
        assert!(page.contains("(  run_id: run-99)") && page.contains(&format!("(trace trace-1  export e-1  page {pages} of {pages})")), "{page}");
    }
}
